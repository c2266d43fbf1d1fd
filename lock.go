package redlock

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redlock-go/redlock/node"
	"github.com/redlock-go/redlock/quorum"
)

type lockState int

const (
	statePending  lockState = iota // being acquired (across retries)
	stateHeld                      // acquired
	stateFailed                    // acquisition failed
	stateReleased                  // released, or lost on extend
)

// Lock is an acquired lock. Its methods are safe for concurrent use.
type Lock struct {
	c     *Client
	keys  []string
	owner string
	rel   *node.Cmd // the release command, prepared once
	ttl   time.Duration

	mu       sync.Mutex
	state    lockState
	acquired time.Time     // start of the successful attempt
	deadline time.Time     // end of validity on the client's monotonic clock
	votes    []quorum.Vote // of the acquisition or last extension

	// Stragglers of the winning acquisition round. A SET still in flight
	// to node i when the round was decided may run there after a release
	// sent later on another connection; Release therefore waits, per node,
	// for that answer before it sends (bits of nodes 0..63; more nodes fall
	// back to a second release when the late answer comes).
	attempt  int       // the round in progress or won
	unsent   uint64    // nodes the won round did not send to (ErrNodeSkipped)
	lateSeen uint64    // nodes of that round that answered after its decision
	pending  uint64    // nodes of the won round whose answer is still due
	answered sync.Cond // signalled when pending shrinks; L is &mu
}

// maskable reports whether node i has a bit in Lock.pending.
func maskable(i int) bool { return i < 64 }

// Key returns the (first) locked key.
func (l *Lock) Key() string { return l.keys[0] }

// Keys returns the locked keys.
func (l *Lock) Keys() []string { return append([]string(nil), l.keys...) }

// Owner returns the random owner value stored on the nodes.
func (l *Lock) Owner() string { return l.owner }

// TTL returns the TTL of the last acquisition or extension.
func (l *Lock) TTL() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ttl
}

// Deadline returns the end of the lock's validity, on the Client's clock
// (monotonic with the real clock). Past it, the lock may be held by someone
// else.
func (l *Lock) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Remaining returns the validity left, or 0 once the deadline has passed or
// the lock was released or lost.
func (l *Lock) Remaining() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.remaining()
}

func (l *Lock) remaining() time.Duration {
	if l.state != stateHeld {
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
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.c.results(quorum.Outcome{Votes: l.votes})
}

func (l *Lock) setState(s lockState) {
	l.mu.Lock()
	l.state = s
	l.mu.Unlock()
}

// late handles an answer of acquisition round attempt that arrived after
// the round was decided. If the lock is no longer wanted, a yes (or an
// unknown outcome) there is undone. While the call is still retrying or the
// lock is held, the key is ours and the final release reaches it: Release
// waits for this answer before it sends to node i, so the release cannot
// overtake the SET.
func (l *Lock) late(attempt, i int, v quorum.Vote) {
	l.mu.Lock()
	ordered := attempt == l.attempt && maskable(i)
	if ordered {
		l.lateSeen |= 1 << i
		if v.Err == ErrNodeSkipped {
			l.unsent |= 1 << i
		}
		if l.pending&(1<<i) != 0 {
			l.pending &^= 1 << i
			l.answered.Broadcast()
		}
	}
	st := l.state
	l.mu.Unlock()
	if !v.OK && v.Err == nil || v.Err == ErrNodeSkipped {
		return // a plain no, or not sent: nothing was written
	}
	if st == stateFailed || (st == stateReleased && !ordered) {
		ctx, cancel := context.WithTimeout(context.Background(), l.c.releaseTimeout(l.ttl))
		defer cancel()
		_, _ = l.c.nodes[i].Do(ctx, l.rel)
	}
}

// startRound records that acquisition round attempt begins.
func (l *Lock) startRound(attempt int) {
	l.mu.Lock()
	l.attempt, l.lateSeen, l.unsent = attempt, 0, 0
	l.mu.Unlock()
}

// awaitAnswer blocks until the won round's call to node i has returned
// (bounded by that call's own deadline) and reports whether that round
// sent anything to node i.
func (l *Lock) awaitAnswer(i int) (sent bool) {
	if !maskable(i) {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.pending&(1<<i) != 0 {
		l.answered.Wait()
	}
	return l.unsent&(1<<i) == 0
}

// Extend resets the lock's TTL to ttl on every node that still holds it
// under our owner value. It succeeds only with a quorum and within the
// current validity; the new deadline counts from the start of the
// extension. It never re-creates an expired key.
//
// On failure the lock's deadline is never moved later. The error matches
// ErrLockLost when the validity had run out or a quorum no longer holds the
// lock (it is then marked lost), ErrNotExtended when nodes failed or timed
// out (the lock stays valid until Deadline), ErrNotHeld after Release, and
// ctx's error if ctx ended the call. It may be called from a background
// renewer while other goroutines use the Lock.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	c := l.c
	if ctx == nil {
		return invalid("nil context")
	}
	if err := c.checkTTL(ttl); err != nil {
		return err
	}
	if c.closed.Load() {
		return ErrClosed
	}
	begin := c.o.clock.Now()
	l.mu.Lock()
	switch {
	case l.state != stateHeld:
		l.mu.Unlock()
		err := fmt.Errorf("%w: extend %q: lock was released or lost", ErrNotHeld, l.keys)
		c.done(ctx, "extend", l, begin, 0, quorum.Outcome{}, err, 0)
		return err
	case l.remaining() <= 0:
		l.state = stateReleased
		l.mu.Unlock()
		qe := &QuorumError{Op: "extend", Keys: l.keys, Need: c.need, Err: ErrLockLost}
		c.done(ctx, "extend", l, begin, 0, quorum.Outcome{}, qe, 0)
		return qe
	}
	if mh := c.o.maxHold; mh > 0 && begin.Add(ttl).After(l.acquired.Add(mh)) {
		left := l.remaining()
		l.mu.Unlock()
		err := fmt.Errorf("%w: extend %q by %v would pass the max hold of %v", ErrNotExtended, l.keys, ttl, mh)
		c.done(ctx, "extend", l, begin, 0, quorum.Outcome{}, err, left)
		return err
	}
	l.mu.Unlock()

	drift := DriftBudget(ttl, c.o.driftFactor)
	cmd := node.Extend(l.keys, l.owner, ttl)
	start := c.o.clock.Now()
	out := c.round(ctx, "extend", l, c.need, nil, func(ctx context.Context, i int) (bool, error) {
		return c.nodes[i].Do(ctx, cmd)
	}).Wait(ctx)
	now := c.o.clock.Now()
	l.mu.Lock()
	newDeadline := start.Add(ttl - drift)
	if out.Reached && out.Err == nil && l.state == stateHeld && start.Before(l.deadline) && newDeadline.Sub(now) > c.o.minValidity {
		l.deadline = newDeadline
		l.ttl = ttl
		l.votes = out.Votes
		left := l.remaining()
		l.mu.Unlock()
		c.done(ctx, "extend", l, begin, 1, out, nil, left)
		return nil
	}
	// Some nodes may have taken a shorter TTL: never move the deadline
	// later, and pull it in if this extension could have shortened it.
	if newDeadline.Before(l.deadline) {
		l.deadline = newDeadline
	}
	qe := &QuorumError{Op: "extend", Keys: l.keys, Need: c.need, Got: out.Yes, Attempts: 1,
		Nodes: c.results(out), Err: ErrNotExtended, Cause: out.Err}
	countable := len(c.nodes) - out.No // nodes that may still hold it
	if l.state != stateHeld {
		qe.Err = ErrNotHeld
	} else if countable < c.need || l.remaining() <= 0 {
		qe.Err = ErrLockLost
		l.state = stateReleased
	}
	if qe.Cause == nil {
		qe.Cause = ctx.Err()
	}
	left := l.remaining()
	l.mu.Unlock()
	c.done(ctx, "extend", l, begin, 1, out, qe, left)
	return qe
}

// Release deletes the lock on every node where it still holds our owner
// value; keys now held by someone else are left untouched. It returns nil
// once a quorum confirmed the delete. Otherwise the error matches ErrNotHeld
// (the lock had expired or was taken over, nodes failed, or it was released
// already) with every node's answer; keys left on unreachable nodes expire
// with their TTL. Release runs even if ctx is already done, bounded by the
// node timeout.
func (l *Lock) Release(ctx context.Context) error {
	c := l.c
	if ctx == nil {
		return invalid("nil context")
	}
	begin := c.o.clock.Now()
	l.mu.Lock()
	if l.state != stateHeld {
		l.mu.Unlock()
		err := fmt.Errorf("%w: release %q: lock was already released, lost or never acquired", ErrNotHeld, l.keys)
		c.done(ctx, "release", l, begin, 0, quorum.Outcome{}, err, 0)
		return err
	}
	left := l.remaining()
	l.state = stateReleased
	l.mu.Unlock()
	bg := context.WithoutCancel(ctx)
	out := c.roundWithin(bg, "release", c.releaseTimeout(l.ttl), l, c.need, nil, func(ctx context.Context, i int) (bool, error) {
		if !l.awaitAnswer(i) {
			return false, errNotSent // the acquisition left this node out
		}
		return c.nodes[i].Do(ctx, l.rel)
	}).Wait(bg)
	if out.Reached {
		c.done(ctx, "release", l, begin, 1, out, nil, left)
		return nil
	}
	qe := &QuorumError{Op: "release", Keys: l.keys, Need: c.need, Got: out.Yes, Attempts: 1,
		Nodes: c.results(out), Err: ErrNotHeld}
	c.done(ctx, "release", l, begin, 1, out, qe, left)
	return qe
}

// done logs and observes the end of an operation on l. remaining is the
// validity the Event reports.
func (c *Client) done(ctx context.Context, op string, l *Lock, begin time.Time, attempts int, out quorum.Outcome, err error, remaining time.Duration) {
	elapsed := c.o.clock.Now().Sub(begin)
	if lg := c.o.logger; lg != nil {
		level, msg := slog.LevelDebug, "redlock: "+op
		switch {
		case err != nil && op == "acquire":
			level, msg = slog.LevelWarn, "redlock: not obtained"
		case err != nil:
			level, msg = slog.LevelWarn, "redlock: "+op+" failed"
		case op == "acquire":
			msg = "redlock: acquired"
		case op == "release":
			msg = "redlock: released"
		case op == "extend":
			msg = "redlock: extended"
		}
		if lg.Enabled(ctx, level) {
			attrs := []slog.Attr{
				slog.Any("keys", l.keys),
				slog.String("owner", l.owner[:8]),
				slog.Duration("elapsed", elapsed),
				slog.Int("votes", out.Yes),
				slog.Int("need", c.need),
				slog.Int("nodes", len(c.nodes)),
			}
			if attempts > 1 {
				attrs = append(attrs, slog.Int("attempts", attempts))
			}
			if err != nil {
				attrs = append(attrs, slog.String("error", err.Error()))
			}
			lg.LogAttrs(ctx, level, msg, attrs...)
		}
	}
	if len(c.o.observers) == 0 {
		return
	}
	e := Event{Op: op, Keys: l.keys, Err: err, Attempts: attempts, Elapsed: elapsed, Remaining: remaining}
	if qe, ok := err.(*QuorumError); ok {
		e.Nodes = qe.Nodes
	} else if out.Votes != nil {
		e.Nodes = c.results(out)
	}
	if err == nil || op != "acquire" {
		e.Lock = l
	}
	for _, fn := range c.o.observers {
		fn(e)
	}
}
