package redlocktest

import (
	"sync"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe"
)

// tracker knows the live Locks of a Cluster's Clients (an observer added
// to each Client) so that Advance can arm their deadline timers before it
// moves the time and wait, after, until every end it caused has been
// reported to the Clients' observers.
type tracker struct {
	mu    sync.Mutex
	locks map[*redlock.Lock]chan struct{} // closed once the Lock's end has been reported
}

// observe is the last observer of every Client of the Cluster: when it
// hears of an event, the Client's other observers have heard of it.
func (t *tracker) observe(e observe.Event) {
	l, _ := e.Lock.(*redlock.Lock)
	if l == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case e.Op == observe.OpLost || e.Op == observe.OpRelease:
		if ch, ok := t.locks[l]; ok {
			close(ch)
			delete(t.locks, l)
		}
	case e.Op == observe.OpAcquire && e.Err == nil:
		if t.locks == nil {
			t.locks = map[*redlock.Lock]chan struct{}{}
		}
		if _, ok := t.locks[l]; !ok {
			t.locks[l] = make(chan struct{})
		}
	}
}

func (t *tracker) live() map[*redlock.Lock]chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[*redlock.Lock]chan struct{}, len(t.locks))
	for l, ch := range t.locks {
		out[l] = ch
	}
	return out
}

// arm sets the deadline timer of every live Lock (a Lock sets it on the
// first call of Done or Context), so that Advance ends each at its own
// time, in order with the other timers.
func (t *tracker) arm() {
	for l := range t.live() {
		l.Done()
	}
}

// settle waits, at most wait, until the end of every Lock that has ended
// has been reported (a loss a renewal found is reported on a goroutine
// of its Client's).
func (t *tracker) settle(wait time.Duration) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for l, reported := range t.live() {
		select {
		case <-l.Done():
		default:
			continue // still held
		}
		select {
		case <-reported:
		case <-timer.C:
			return
		}
	}
}
