// Package clock is the time source of the lock: every validity and deadline
// computation goes through a Clock, so tests can fake time and chaos tests can
// skew it.
//
// The real clock returns time.Now, whose readings carry Go's monotonic clock:
// differences between them (t.Sub, time.Until) are immune to wall-clock jumps.
package clock

import (
	"context"
	"sync"
	"time"
)

// Clock is a source of time. Implementations are safe for concurrent use.
type Clock interface {
	// Now returns the current time. Differences between two readings are
	// what the lock uses; the real clock's readings are monotonic.
	Now() time.Time
	// Sleep waits for d or until ctx is done; it returns ctx's error in
	// the latter case.
	Sleep(ctx context.Context, d time.Duration) error
}

// Real returns the system clock (time.Now, with its monotonic reading).
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Fake is a manually driven clock for tests. Sleep advances it by the
// requested duration instead of blocking. The zero value is not usable; call
// NewFake.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

// NewFake returns a fake clock that reads start until advanced.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the fake time forward by d.
// Timers that fall due run, each on its own goroutine.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	run := f.due()
	f.mu.Unlock()
	for _, fn := range run {
		go fn()
	}
}

// Sleep advances the clock by d and returns at once, or returns ctx's error
// if ctx is already done.
func (f *Fake) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d > 0 {
		f.Advance(d)
	}
	return nil
}

// Scaled returns a clock that, from the moment of the call, runs rate times
// as fast as base: with rate 0.9 a second of base time reads as 900ms. It
// models a client whose clock rate differs from the Redis nodes' (chaos
// tests), and Sleep waits d of scaled time. rate must be positive.
func Scaled(base Clock, rate float64) Clock {
	if rate <= 0 {
		panic("clock: Scaled rate must be positive")
	}
	return &scaled{base: base, origin: base.Now(), rate: rate}
}

type scaled struct {
	base   Clock
	origin time.Time
	rate   float64
}

func (s *scaled) Now() time.Time {
	el := s.base.Now().Sub(s.origin)
	return s.origin.Add(time.Duration(float64(el) * s.rate))
}

func (s *scaled) Sleep(ctx context.Context, d time.Duration) error {
	return s.base.Sleep(ctx, time.Duration(float64(d)/s.rate))
}

// Timers is implemented by clocks that run timers on their own time: the
// real, fake and scaled clocks.
type Timers interface {
	// AfterFunc calls f on its own goroutine once d has passed on this
	// clock. stop cancels it and reports whether it did so before f ran.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// AfterFunc calls f once d has passed on c (on c's own timers where it has
// them, else on the real clock) and returns a function that cancels it.
func AfterFunc(c Clock, d time.Duration, f func()) (stop func() bool) {
	if t, ok := c.(Timers); ok {
		return t.AfterFunc(d, f)
	}
	return time.AfterFunc(d, f).Stop
}

func (realClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

func (s *scaled) AfterFunc(d time.Duration, f func()) func() bool {
	return AfterFunc(s.base, time.Duration(float64(d)/s.rate), f)
}

// AfterFunc runs f (on its own goroutine) once Advance or Sleep has moved
// the fake time d past now.
func (f *Fake) AfterFunc(d time.Duration, fn func()) func() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{at: f.now.Add(d), f: fn}
	if d <= 0 {
		t.fired = true
		go fn()
		return t.stop(f)
	}
	f.timers = append(f.timers, t)
	return t.stop(f)
}

type fakeTimer struct {
	at    time.Time
	f     func()
	fired bool
}

func (t *fakeTimer) stop(f *Fake) func() bool {
	return func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		if t.fired {
			return false
		}
		t.fired = true
		return true
	}
}

// due removes and returns the timers due at f.now. f.mu must be held.
func (f *Fake) due() []func() {
	var run []func()
	kept := f.timers[:0]
	for _, t := range f.timers {
		switch {
		case t.fired:
		case !t.at.After(f.now):
			t.fired = true
			run = append(run, t.f)
		default:
			kept = append(kept, t)
		}
	}
	f.timers = kept
	return run
}
