package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redlock-go/redlock/clock"
	"github.com/redlock-go/redlock/node"
	"github.com/redlock-go/redlock/quorum"
)

// Lock is an acquired lock. Its methods are safe for concurrent use. A
// nil *Lock (the handle of a failed TryLock whose error was ignored) is
// safe to use: its accessors return zero values, Release and Extend an
// error matching ErrNotHeld.
//
// A Lock ends once: released (Release), or lost (its validity ran out, or
// a renewal or Extend found that a quorum no longer holds it). end is the
// one place that ends it: it records the cause, closes Done, cancels
// Context and stops the Lock's timers.
type Lock struct {
	c        *Client
	keys     []string
	owner    string
	token    int64     // fencing token (WithFencing), else 0
	won      *answers  // what the nodes answered the winning attempt, for Release
	acquired time.Time // start of the winning attempt
	watchdog bool      // renewed in the background (see Watchdog)
	passes   int       // times the hold was passed on inside this Client in a row (passOn)

	mu       sync.Mutex
	ttl      time.Duration
	deadline time.Time      // end of validity on the client's monotonic clock
	votes    []quorum.Vote  // of the acquisition or last extension; a copy (see setVotes)
	votesA   [5]quorum.Vote // backing of votes up to 5 nodes
	ended    error          // why the Lock ended: ErrReleased or a loss; nil while held
	released bool           // Release was called
	done     chan struct{}  // made on demand, closed by end
	ctx      context.Context
	cancel   context.CancelCauseFunc
	expiry   func() bool   // stops the timer that ends the Lock at its deadline; nil if none
	renewal  func() bool   // stops the timer of a retried watchdog renewal; nil if none
	renewing chan struct{} // closed when the renewal in flight returns; nil if none
	renewAt  int           // 1 + index in the Client's renewal set (watchdog), 0 when not in it; guarded by c.renewer.mu
}

// ErrReleased is the cause of a Lock's end (context.Cause of its Context)
// after Release.
var ErrReleased = errors.New("redlock: lock released")

func (c *Client) newLock(keys []string, ttl time.Duration, a *attempt, out quorum.Outcome, watchdog bool) *Lock {
	l := &Lock{c: c, keys: keys, owner: a.owner, token: a.token, won: c.watch(a), acquired: a.start, watchdog: watchdog,
		ttl: ttl, deadline: a.start.Add(ttl - DriftBudget(ttl, c.o.driftFactor))}
	l.setVotes(out.Votes)
	if watchdog {
		l.mu.Lock()
		l.armExpiry()
		c.renewer.add(c, l)
		l.mu.Unlock()
	}
	return l
}

// setVotes keeps a copy of a round's votes: the round's own slice would
// keep the round, its commands and its contexts alive for as long as the
// Lock is held. l.mu must be held, or l not yet shared.
func (l *Lock) setVotes(v []quorum.Vote) {
	if len(v) <= len(l.votesA) {
		l.votes = append(l.votesA[:0], v...)
		return
	}
	l.votes = append([]quorum.Vote(nil), v...)
}

// Key returns the (first) locked key.
func (l *Lock) Key() string {
	if l == nil {
		return ""
	}
	return l.keys[0]
}

// Keys returns the locked keys.
func (l *Lock) Keys() []string {
	if l == nil {
		return nil
	}
	return append([]string(nil), l.keys...)
}

// Owner returns the owner value stored on the nodes: the Client's ID, a
// colon and the attempt's 128 random bits (see SplitOwner).
func (l *Lock) Owner() string {
	if l == nil {
		return ""
	}
	return l.owner
}

// Token returns the lock's fencing token (WithFencing), or 0 without
// fencing. Pass it with every write to the protected resource, which must
// refuse a write whose token is lower than one it has already seen (see
// package fence): a holder that was paused past its deadline then cannot
// overwrite what a later holder wrote.
func (l *Lock) Token() int64 {
	if l == nil {
		return 0
	}
	return l.token
}

// TTL returns the TTL of the last acquisition, extension or renewal.
func (l *Lock) TTL() time.Duration {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ttl
}

// Deadline returns the end of the lock's validity, on the Client's clock
// (monotonic with the real clock). Past it, the lock may be held by someone
// else.
func (l *Lock) Deadline() time.Time {
	if l == nil {
		return time.Time{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Remaining returns the validity left, or 0 once the deadline has passed or
// the lock was released or lost.
func (l *Lock) Remaining() time.Duration {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.remaining()
}

func (l *Lock) remaining() time.Duration {
	if l.ended != nil || l.c == nil { // ended, or a zero Lock not made by a Client
		return 0
	}
	if d := l.deadline.Sub(l.c.o.clock.Now()); d > 0 {
		return d
	}
	return 0
}

// Nodes returns what each node answered in the acquisition (or the last
// successful extension).
func (l *Lock) Nodes() []NodeResult {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.c.results(quorum.Outcome{Votes: l.votes})
}

// Done returns a channel that is closed when the Lock ends: at Release, or
// as soon as the process can no longer be sure it holds the lock (a
// renewal or Extend found that a quorum no longer holds our value, or the
// validity deadline arrived before a renewal succeeded). A timer set for
// the deadline on the Client's clock closes it then, not the next renewal.
// Err says why. A process paused past its deadline learns of the loss only
// when it runs again: that is what fencing tokens are for.
func (l *Lock) Done() <-chan struct{} {
	if l == nil {
		return closed
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		l.done = make(chan struct{})
		if l.ended != nil {
			close(l.done)
		}
	}
	l.armExpiry()
	return l.done
}

// closed is the Done channel of a nil Lock.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Context returns a context that is cancelled when the Lock ends (see
// Done); context.Cause then returns Err's error. It does not end with the
// ctx the Lock was acquired with.
func (l *Lock) Context() context.Context {
	if l == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(ErrNotHeld)
		return ctx
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil {
		l.ctx, l.cancel = context.WithCancelCause(context.Background())
		if l.ended != nil {
			l.cancel(l.ended)
		}
	}
	l.armExpiry()
	return l.ctx
}

// Err returns nil while the lock is held and its deadline has not passed
// (checked on the clock, not left to the timer), ErrReleased after
// Release, and otherwise why it was lost: an error matching ErrLockLost,
// a *QuorumError with the per-node detail when a renewal or Extend found
// it gone.
func (l *Lock) Err() error {
	if l == nil || l.c == nil { // nil, or a zero Lock not made by a Client
		return ErrNotHeld
	}
	l.mu.Lock()
	if l.ended == nil && l.remaining() <= 0 {
		l.mu.Unlock()
		l.end(l.expired())
		l.mu.Lock()
	}
	defer l.mu.Unlock()
	return l.ended
}

// expired is the cause of a Lock whose deadline passed without a renewal.
func (l *Lock) expired() error {
	if mh := l.c.o.maxHold; l.watchdog && mh > 0 && l.c.o.clock.Now().Sub(l.acquired)+l.c.o.lease > mh {
		return fmt.Errorf("%w: %q: the validity ran out at the max hold of %v: %w", ErrLockLost, l.keys, mh, ErrMaxHold)
	}
	return fmt.Errorf("%w: %q: the validity ran out before a renewal succeeded", ErrLockLost, l.keys)
}

// armExpiry sets the timer that ends the Lock at its deadline, if it is
// not set. l.mu must be held.
func (l *Lock) armExpiry() {
	if l.ended != nil || l.expiry != nil {
		return
	}
	d := l.deadline.Sub(l.c.o.clock.Now())
	l.expiry = clock.AfterFunc(l.c.o.clock, d, l.onExpiry)
}

// onExpiry runs at the deadline the timer was set for; an extension may
// have moved the deadline since, then it sets the timer again.
func (l *Lock) onExpiry() {
	l.mu.Lock()
	l.expiry = nil
	if l.ended != nil {
		l.mu.Unlock()
		return
	}
	if l.remaining() > 0 {
		l.armExpiry()
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.end(l.expired())
}

// end ends the Lock with cause, once: it records the cause, closes Done,
// cancels Context and stops the timers. A loss is logged and observed
// (Event "lost"). It reports whether this call ended the Lock.
func (l *Lock) end(cause error) bool {
	l.mu.Lock()
	ended := l.endLocked(cause)
	l.mu.Unlock()
	if ended && cause != ErrReleased {
		l.c.report(context.Background(), outcome{op: opLost, keys: l.keys, owner: l.owner, lock: l, begin: l.c.o.clock.Now(), err: cause})
	}
	return ended
}

// endLocked is end without the report. l.mu must be held.
func (l *Lock) endLocked(cause error) bool {
	if l.ended != nil {
		return false
	}
	l.ended = cause
	if l.done != nil {
		close(l.done)
	}
	if l.cancel != nil {
		l.cancel(cause)
	}
	for _, stop := range []func() bool{l.expiry, l.renewal} {
		if stop != nil {
			stop()
		}
	}
	l.expiry, l.renewal = nil, nil
	l.c.renewer.remove(l)
	return true
}

// Extend resets the lock's TTL to ttl on every node that still holds it
// under our owner value. It succeeds only with a quorum and within the
// current validity; the new deadline counts from the start of the
// extension. It never re-creates an expired key.
//
// On failure the lock's deadline is never moved later. The error matches
// ErrLockLost when the validity had run out or a quorum no longer holds the
// lock (the Lock then ends: see Done), ErrNotExtended when nodes failed or
// timed out (the lock stays valid until Deadline) or it would pass
// WithMaxHold (also ErrMaxHold), ErrNotHeld after Release or a loss, and
// ctx's error if ctx ended the call; a ctx that is already done sends
// nothing. It may be called while a watchdog renews the same Lock.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if l == nil {
		return fmt.Errorf("%w: extend: nil lock", ErrNotHeld)
	}
	if ctx == nil {
		return invalid("nil context")
	}
	if err := l.c.checkTTL(ttl); err != nil {
		return err
	}
	return l.extend(ctx, ttl, opExtend)
}

// extend is Extend for a checked ttl; o is opExtend or opRenew.
func (l *Lock) extend(ctx context.Context, ttl time.Duration, o op) error {
	c := l.c
	if !c.enter() {
		return ErrClosed
	}
	defer c.exit()
	begin := c.o.clock.Now()
	if err := l.extendable(ctx, begin, ttl, o, nil); err != nil {
		return err
	}
	cmd := node.Extend(l.keys, l.owner, ttl)
	start := c.o.clock.Now()
	out := c.round(ctx, o, ttl, c.need, func(ctx context.Context, i int) (int64, bool, error) {
		return c.nodes[i].DoValue(ctx, cmd)
	}).Wait(ctx)
	return l.settle(ctx, o, begin, start, ttl, out)
}

// settle applies the outcome of an extension or renewal round that
// started at start: on a quorum within the current validity the deadline
// moves to start + ttl - drift; otherwise it never moves later, and the
// Lock ends if too few nodes may still hold it. It reports the operation
// and returns its error.
func (l *Lock) settle(ctx context.Context, o op, begin, start time.Time, ttl time.Duration, out quorum.Outcome) error {
	c := l.c
	now := c.o.clock.Now()
	newDeadline := start.Add(ttl - DriftBudget(ttl, c.o.driftFactor))
	l.mu.Lock()
	if out.Reached && out.Err == nil && l.ended == nil && start.Before(l.deadline) && newDeadline.Sub(now) > c.o.minValidity {
		l.deadline, l.ttl = newDeadline, ttl
		l.setVotes(out.Votes)
		left := l.remaining()
		l.mu.Unlock()
		c.report(ctx, outcome{op: o, keys: l.keys, owner: l.owner, lock: l, begin: begin, attempts: 1, round: out, left: left})
		return nil
	}
	// Some nodes may have taken a shorter TTL: never move the deadline
	// later, and pull it in if this extension could have shortened it.
	if newDeadline.Before(l.deadline) {
		l.deadline = newDeadline
	}
	qe := &QuorumError{Op: o.String(), Keys: l.keys, Need: c.need, Got: out.Yes, Attempts: 1,
		Nodes: c.results(out), Err: ErrNotExtended, Cause: out.Err}
	lost := false
	if l.ended != nil {
		qe.Err = ErrNotHeld
	} else if len(c.nodes)-out.No < c.need || l.remaining() <= 0 { // too few nodes may still hold it
		qe.Err, lost = ErrLockLost, true
	}
	if qe.Cause == nil {
		qe.Cause = ctx.Err()
	}
	left := l.remaining()
	l.mu.Unlock()
	if lost {
		l.end(qe)
	}
	c.report(ctx, outcome{op: o, keys: l.keys, owner: l.owner, lock: l, begin: begin, attempts: 1, round: out, err: qe, left: left})
	return qe
}

// extendable checks, before any traffic, that the Lock may be extended by
// ttl from begin; otherwise it reports and returns why not. With renewing
// (a watchdog renewal), a Lock that ended, is being renewed or waits for a
// retry is skipped without a report; one that reached the max hold leaves
// the renewal set; one that may be renewed is marked as renewing, in the
// same critical section, so that Release waits for the renewal.
func (l *Lock) extendable(ctx context.Context, begin time.Time, ttl time.Duration, o op, renewing chan struct{}) error {
	c := l.c
	l.mu.Lock()
	var err error
	expired := false
	switch {
	case renewing != nil && (l.ended != nil || l.renewing != nil || l.renewal != nil):
		l.mu.Unlock()
		return ErrNotHeld
	case l.ended != nil:
		err = fmt.Errorf("%w: %s %q: lock was released or lost", ErrNotHeld, o, l.keys)
	case l.remaining() <= 0:
		err, expired = &QuorumError{Op: o.String(), Keys: l.keys, Need: c.need, Err: ErrLockLost}, true
	case c.o.maxHold > 0 && begin.Add(ttl).After(l.acquired.Add(c.o.maxHold)):
		err = fmt.Errorf("%w: %s %q by %v would pass the max hold of %v", ErrMaxHold, o, l.keys, ttl, c.o.maxHold)
	case ctx.Err() != nil: // a call that is already over sends nothing
		err = &QuorumError{Op: o.String(), Keys: l.keys, Need: c.need, Err: ErrNotExtended, Cause: ctx.Err()}
	}
	left := l.remaining()
	switch {
	case renewing != nil && err == nil:
		l.renewing = renewing
	case renewing != nil && isMaxHold(err):
		c.renewer.remove(l)
	}
	l.mu.Unlock()
	if err == nil {
		return nil
	}
	if expired {
		l.end(l.expired())
	}
	c.report(ctx, outcome{op: o, keys: l.keys, owner: l.owner, lock: l, begin: begin, err: err, left: left})
	return err
}

// Release deletes the lock on every node where it still holds our owner
// value; keys now held by someone else are left untouched, and a lock
// that was lost or ran past its deadline is cleaned up the same way. It
// ends the Lock first (Done is closed, a watchdog stops, and a renewal in flight is
// waited for, so no renewal reaches a node after the release). It sends
// only to nodes that may hold the lock (not to those that refused the
// acquisition), to each after it answered the acquisition's command. It
// returns nil once a quorum confirmed the delete. Otherwise the error
// matches ErrNotHeld (the lock had expired or was taken over, nodes
// failed, it was released already, or the Client was closed: then also
// ErrClosed) with every node's answer; keys left on unreachable nodes
// expire with their TTL. Release runs even if ctx is already done,
// bounded by the node timeout.
func (l *Lock) Release(ctx context.Context) error {
	if l == nil {
		return fmt.Errorf("%w: release: nil lock", ErrNotHeld)
	}
	c := l.c
	if ctx == nil {
		return invalid("nil context")
	}
	if !c.enter() {
		return fmt.Errorf("%w: release %q: %w: the lock stays until its TTL", ErrNotHeld, l.keys, ErrClosed)
	}
	defer c.exit()
	begin := c.o.clock.Now()
	l.mu.Lock()
	left, ttl, renewing, again := l.remaining(), l.ttl, l.renewing, l.released
	l.released = true
	held := l.endLocked(ErrReleased) // no renewal starts after this; a lost Lock stays lost, and what is left of it is deleted all the same
	l.mu.Unlock()
	if again {
		err := fmt.Errorf("%w: release %q: lock was already released", ErrNotHeld, l.keys)
		c.report(ctx, outcome{op: opRelease, keys: l.keys, owner: l.owner, lock: l, begin: begin, err: err})
		return err
	}
	if renewing != nil {
		<-renewing // bounded by the node timeout
	}
	if held && left > 0 && l.passOn() {
		c.report(ctx, outcome{op: opRelease, keys: l.keys, owner: l.owner, lock: l, begin: begin, left: left, passed: true})
		return nil
	}
	q := c.rel.next()
	for i := range c.nodes { // before Release can return: see releases
		c.rel.add(i, l.keys, q)
	}
	announce := node.Release(l.keys, l.owner, true) // wakes the waiters (package handoff)
	var plain *node.Cmd                             // for nodes that do not announce (cluster)
	for _, n := range c.nodes {
		if !n.Announces() {
			plain = node.Release(l.keys, l.owner, false)
			break
		}
	}
	// The node calls do not end with ctx (roundWithin), nor does the wait.
	out := c.roundWithin(ctx, opRelease, c.releaseTimeout(ttl), c.need, func(ctx context.Context, i int) (int64, bool, error) {
		if !l.won.mayHold(c, i) {
			c.rel.done(i, l.keys, q)
			return 0, false, errNotSent // nothing of ours was written there
		}
		if c.nodes[i].Announces() {
			return c.release(ctx, i, l.keys, q, announce)
		}
		return c.release(ctx, i, l.keys, q, plain)
	}).Wait(context.Background())
	var err error
	if !out.Reached {
		err = &QuorumError{Op: "release", Keys: l.keys, Need: c.need, Got: out.Yes, Attempts: 1,
			Nodes: c.results(out), Err: ErrNotHeld}
	}
	if c.hub != nil && len(l.keys) == 1 && l.passes < c.o.localHandoff {
		// Wake this Client's next waiter now; after the last pass allowed
		// in a row it waits for the nodes' notification like everyone else.
		c.hub.ReleasedOwner(l.keys[0], l.owner)
	}
	c.report(ctx, outcome{op: opRelease, keys: l.keys, owner: l.owner, lock: l, begin: begin, attempts: 1, round: out, err: err, left: left})
	return err
}
