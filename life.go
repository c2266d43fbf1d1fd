package redlock

import (
	"context"

	"github.com/redlock-go/redlock/internal/lockstate"
)

// life is where a Lock is in its life and, once it ended, why. This file
// alone changes it, along the table of package lockstate (see move).
type life struct {
	phase lockstate.Phase
	cause error // why the Lock ended: ErrReleased or the loss; nil until it ends
}

// over reports whether the Lock ended.
func (f *life) over() bool { return f.phase.Over() }

// to moves l along the phase table on event e, which does not end l, and
// reports whether the table lists that transition. l.mu must be held.
func (l *Lock) to(e lockstate.Event) bool { return l.move(e, nil) }

// move moves l along the phase table on event e; cause is why l ends if e
// ends it. One the table does not list is a bug in this package; it costs
// the Lock, not the process (move runs on timer and renewer goroutines
// too): l is then lost (see fault) and move returns false. l.mu must be
// held.
func (l *Lock) move(e lockstate.Event, cause error) bool {
	next := lockstate.Next
	if t := l.c.o.phaseTable; t != nil {
		next = t
	}
	p, ok := next(l.life.phase, e)
	if !ok {
		l.fault(e)
		return false
	}
	l.enter(p, cause)
	return true
}

// fault loses l with a *phaseError naming its phase and event e, which
// the phase table does not pair, and reports the loss, logged at error
// level, on another goroutine (l.mu is held here). If l had ended, the
// log alone says so. l.mu must be held.
func (l *Lock) fault(e lockstate.Event) {
	err := &phaseError{Keys: l.keys, Phase: l.life.phase.String(), Event: e.String()}
	o := l.lostEvent(err)
	if p, ok := lockstate.Next(l.life.phase, lockstate.Lose); ok { // the table's own row, whatever a test wraps
		l.enter(p, err)
	} else {
		o.logOnly = true
	}
	l.c.reportLater([]outcome{o})
}

// enter is the one write of l's phase; entering an end it ends l with
// cause (see endWith). l.mu must be held.
func (l *Lock) enter(p lockstate.Phase, cause error) {
	was := l.life.over()
	l.life.phase = p
	if p.Over() && !was {
		l.endWith(cause)
	}
}

// lose loses l with cause, once. l.mu must be held. It reports whether
// this call ended the Lock with cause: false if it had ended, or if the
// table refused (l then was lost with a *phaseError, reported by fault).
func (l *Lock) lose(cause error) bool {
	return !l.life.over() && l.move(lockstate.Lose, cause)
}

// end loses l with cause, once, and reports it (Event "lost"). It reports
// whether this call ended the Lock. l.mu must not be held.
func (l *Lock) end(cause error) bool {
	now := func() bool {
		l.mu.Lock()
		defer l.mu.Unlock() // the phase table (a test's) may panic
		return l.lose(cause)
	}()
	if now {
		l.c.report(context.Background(), l.lostEvent(cause))
	}
	return now
}

func (l *Lock) lostEvent(cause error) outcome {
	return outcome{op: opLost, keys: l.keys, owner: l.owner, lock: l, begin: l.c.o.clock.Now(), err: cause}
}

// endWith is the Lock's one exit, as its phase enters an end: it records
// the cause, cancels the Lock's contexts, closes Done, stops the timers,
// leaves the renewal set and fails the extensions still queued. l.mu must
// be held.
func (l *Lock) endWith(cause error) {
	l.life.cause = cause
	if l.more != nil {
		for _, cancel := range l.more.bound { // before Done closes: whoever sees the end sees them done
			cancel(cause)
		}
		l.more.bound = nil
	}
	if l.cancel != nil {
		l.cancel(cause)
	}
	if l.done != nil {
		close(l.done)
	}
	for _, stop := range []func() bool{l.expiry, l.retry} {
		if stop != nil {
			stop()
		}
	}
	l.expiry, l.retry = nil, nil
	if l.renewer != nil {
		l.renewer.remove(l)
	}
	l.more.wake()
}
