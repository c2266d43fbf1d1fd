package redlock

import (
	"context"
	"errors"
	"time"

	"github.com/redlock-go/redlock/clock"
)

// Watchdog, passed as the TTL to Lock, TryLock, LockKeys or TryLockKeys,
// takes the lock in watchdog mode: it is acquired for the Client's lease
// (WithWatchdog, default 30 s) and renewed in the background every renewal
// interval (default lease/3) by the Extend rules (owner checked, a quorum,
// within the current validity, never re-created) until Release, until it is
// lost (Done), or until WithMaxHold is reached. A renewal that fails
// because nodes failed is tried again soon, before the deadline, not only
// at the next interval. Use it when the work's length is unknown; use a
// fixed TTL when the work must not outlive it.
const Watchdog time.Duration = 0

// Defaults of WithWatchdog.
const (
	DefaultLease = 30 * time.Second
)

// ErrMaxHold: an extension or renewal would keep the lock past WithMaxHold.
// It matches ErrNotExtended; the cause of a watchdog lock that ran out
// there matches it too.
var ErrMaxHold = &maxHoldError{}

type maxHoldError struct{}

func (*maxHoldError) Error() string        { return "redlock: max hold reached" }
func (*maxHoldError) Is(target error) bool { return target == ErrNotExtended }

func isMaxHold(err error) bool { return errors.Is(err, ErrMaxHold) }

// scheduleRenewal sets the timer of the Lock's next renewal, d from now.
// l.mu must be held.
func (l *Lock) scheduleRenewal(d time.Duration) {
	if l.ended != nil {
		return
	}
	l.renewal = clock.AfterFunc(l.c.o.clock, d, l.renew)
}

// renew runs one watchdog renewal on the timer's goroutine and schedules
// the next: after the interval if it succeeded, soon (within the validity
// left) if nodes failed; none once the Lock ended, the Client closed, or
// the next lease would pass the max hold (the Lock then ends at its
// deadline with a cause matching ErrMaxHold).
func (l *Lock) renew() {
	c := l.c
	l.mu.Lock()
	if l.ended != nil {
		l.mu.Unlock()
		return
	}
	l.renewal = nil
	done := make(chan struct{})
	l.renewing = done
	l.mu.Unlock()
	err := l.extend(context.Background(), c.o.lease, opRenew)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.renewing = nil
	close(done)
	switch {
	case err == nil:
		l.scheduleRenewal(c.o.renewEvery)
	case errors.Is(err, ErrNotExtended) && !isMaxHold(err):
		l.scheduleRenewal(l.retryIn())
	}
}

// retryIn is the wait before a failed renewal is tried again: a tenth of
// the interval, but within a quarter of the validity left, so that several
// tries fit before the deadline. l.mu must be held.
func (l *Lock) retryIn() time.Duration {
	d := l.c.o.renewEvery / 10
	if q := l.remaining() / 4; q < d {
		d = q
	}
	if d < time.Millisecond {
		d = time.Millisecond
	}
	return d
}
