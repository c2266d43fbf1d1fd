package redlocktest

import (
	"context"
	"sort"
	"sync"
	"time"
)

// timerWait bounds how long Advance waits, in real time, for one timer's
// function (a renewal round, the end of a lock) before it moves on: a
// function blocked on something only a later Advance would bring must not
// hang the test.
const timerWait = 10 * time.Second

// stepClock is the Cluster's clock (clock.Clock and clock.Timers). Unlike
// clock.Fake, Sleep does not move the time (a Client waiting between
// attempts would otherwise run the time ahead of the nodes and of every
// other Client), and Advance runs the timers that fall due one after
// another, each at its own time and to its end: a watchdog renewal due
// halfway through an Advance renews at that time, against nodes whose
// keys have not yet expired, as it would in real time.
type stepClock struct {
	adv     sync.Mutex // one Advance at a time
	mu      sync.Mutex
	now     time.Time
	seq     uint64
	timers  []*stepTimer
	setTime func(time.Time) // moves the nodes' time; called without mu
	running int             // functions AfterFunc started at once, not yet returned
	idle    chan struct{}   // closed when running drops to 0
}

type stepTimer struct {
	at    time.Time
	seq   uint64 // order of timers due at the same time
	fn    func()
	fired bool
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Sleep waits d in real time, or until ctx is done: the Client's backoff
// between attempts polls the nodes without moving the test's time.
func (c *stepClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// AfterFunc runs fn once Advance has moved the time d past now; d <= 0
// runs it at once on its own goroutine.
func (c *stepClock) AfterFunc(d time.Duration, fn func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &stepTimer{at: c.now.Add(d), seq: c.seq, fn: fn}
	if d <= 0 {
		t.fired = true
		c.start(fn)
	} else {
		c.timers = append(c.timers, t)
	}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if t.fired {
			return false
		}
		t.fired = true
		return true
	}
}

// start runs fn on its own goroutine, counted in running until it
// returns. c.mu must be held.
func (c *stepClock) start(fn func()) {
	if c.running == 0 {
		c.idle = make(chan struct{})
	}
	c.running++
	go func() {
		defer func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.running--; c.running == 0 {
				close(c.idle)
			}
		}()
		fn()
	}()
}

// wait returns once no function started by start runs (those they start
// included), or after wait in real time.
func (c *stepClock) wait(wait time.Duration) {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		c.mu.Lock()
		idle := c.idle
		if c.running == 0 {
			idle = nil
		}
		c.mu.Unlock()
		if idle == nil {
			return
		}
		select {
		case <-idle:
		case <-t.C:
			return
		}
	}
}

// Advance moves the time d forward: to each timer due by then in turn,
// running it to its end (timers it arms that fall due by then run too),
// and then to now+d. The nodes' time follows each step before the timer
// runs.
func (c *stepClock) Advance(d time.Duration) {
	c.adv.Lock()
	defer c.adv.Unlock()
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		t := c.next(target)
		if t == nil {
			if target.After(c.now) {
				c.now = target
			}
			now := c.now
			c.mu.Unlock()
			c.setTime(now)
			return
		}
		t.fired = true
		if t.at.After(c.now) {
			c.now = t.at
		}
		now := c.now
		c.mu.Unlock()
		c.setTime(now)
		run(t.fn)
	}
}

// next removes fired timers and returns the earliest one due by target,
// or nil. c.mu must be held.
func (c *stepClock) next(target time.Time) *stepTimer {
	kept := c.timers[:0]
	for _, t := range c.timers {
		if !t.fired {
			kept = append(kept, t)
		}
	}
	for i := len(kept); i < len(c.timers); i++ {
		c.timers[i] = nil
	}
	c.timers = kept
	sort.Slice(kept, func(i, j int) bool {
		if !kept[i].at.Equal(kept[j].at) {
			return kept[i].at.Before(kept[j].at)
		}
		return kept[i].seq < kept[j].seq
	})
	if len(kept) == 0 || kept[0].at.After(target) {
		return nil
	}
	return kept[0]
}

// run calls fn on its own goroutine and waits for it, at most timerWait.
func run(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	t := time.NewTimer(timerWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
