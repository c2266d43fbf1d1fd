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
	owner string // of the winning attempt
	ttl   time.Duration

	mu       sync.Mutex
	state    lockState
	acquired time.Time     // start of the successful attempt
	deadline time.Time     // end of validity on the client's monotonic clock
	votes    []quorum.Vote // of the acquisition or last extension
	won      *try          // the winning attempt (owner, release command); set before the Lock is returned
	first    try           // the first attempt's state, saving an allocation
	answered sync.Cond     // signalled when a late answer of an attempt arrives; L is &mu
}

// try is one acquisition attempt. Every attempt has its own owner value, so
// that its clean-up can never delete what a later attempt wrote, and every
// node's clean-up can wait for that node's answer without holding up the
// next attempt.
type try struct {
	owner string
	rel   *node.Cmd

	// Guarded by Lock.mu.
	verdict  verdict
	answered uint64 // nodes whose call has returned (bit i: node i)
	holds    uint64 // of those, the ones that may hold owner: yes, or an error (unknown outcome)
}

type verdict int

const (
	open verdict = iota // the round or its judgement is in progress
	won                 // the lock was returned; Release cleans up
	lost                // failed; every node that may hold owner is released
)

// maxNodes is how many nodes a Client takes: try tracks nodes in 64-bit sets.
const maxNodes = 64

// A nil *Lock (the handle of a failed TryLock whose error was ignored) is
// safe to use: its accessors return zero values, Release and Extend an
// error matching ErrNotHeld.

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

// TTL returns the TTL of the last acquisition or extension.
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
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.c.results(quorum.Outcome{Votes: l.votes})
}

func (l *Lock) setState(s lockState) {
	l.mu.Lock()
	l.state = s
	l.mu.Unlock()
}

// judge records the on-time answers of attempt t and its verdict, and
// returns the nodes that answered and may hold t's owner value. l.mu must
// be held.
func (l *Lock) judge(t *try, votes []quorum.Vote, v verdict) (holds uint64) {
	for i, vote := range votes {
		if !vote.Done {
			continue // answered after the decision: recorded by late
		}
		t.answered |= 1 << i
		if l.c.mayHold(i, vote) {
			t.holds |= 1 << i
		}
	}
	t.verdict = v
	return t.holds
}

// late handles an answer of attempt t that arrived after its round was
// decided. For a lost attempt a node that may hold its owner value is
// released now, after its answer, so the release cannot overtake the
// attempt's own command. For a won one, Release waits for this answer
// before it sends to node i. Before the verdict the answer is only recorded;
// the verdict acts on it.
func (l *Lock) late(t *try, i int, v quorum.Vote) {
	hold := l.c.mayHold(i, v)
	l.mu.Lock()
	t.answered |= 1 << i
	if hold {
		t.holds |= 1 << i
	}
	undo := hold && t.verdict == lost
	ttl := l.ttl // Extend may change it
	l.answered.Broadcast()
	l.mu.Unlock()
	if undo {
		q := l.c.rel.next()
		l.c.rel.add(i, l.keys, q)
		ctx, cancel := context.WithTimeout(context.Background(), l.c.releaseTimeout(ttl))
		defer cancel()
		start := l.c.o.clock.Now()
		ok, err := l.c.release(ctx, i, l.keys, q, t.rel)
		l.c.observeNode("release", i, quorum.Vote{OK: ok && err == nil, Err: err, Latency: l.c.o.clock.Now().Sub(start)})
	}
}

// awaitAnswer blocks until the winning attempt's call to node i has
// returned (bounded by that call's own deadline) and reports whether node i
// may hold our owner value.
func (l *Lock) awaitAnswer(i int) (holds bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.won
	for t.answered&(1<<i) == 0 {
		l.answered.Wait()
	}
	return t.holds&(1<<i) != 0
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
	if l == nil {
		return fmt.Errorf("%w: extend: nil lock", ErrNotHeld)
	}
	c := l.c
	if ctx == nil {
		return invalid("nil context")
	}
	if err := c.checkTTL(ttl); err != nil {
		return err
	}
	if !c.enter() {
		return ErrClosed
	}
	defer c.exit()
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
	if err := ctx.Err(); err != nil { // a call that is already over sends nothing
		left := l.remaining()
		l.mu.Unlock()
		qe := &QuorumError{Op: "extend", Keys: l.keys, Need: c.need, Err: ErrNotExtended, Cause: err}
		c.done(ctx, "extend", l, begin, 0, quorum.Outcome{}, qe, left)
		return qe
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
// value; keys now held by someone else are left untouched. It sends only to
// nodes that may hold it (not to those that refused the acquisition), to
// each after it answered the acquisition's command. It returns nil
// once a quorum confirmed the delete. Otherwise the error matches ErrNotHeld
// (the lock had expired or was taken over, nodes failed, or it was released
// already) with every node's answer; keys left on unreachable nodes expire
// with their TTL. Release runs even if ctx is already done, bounded by the
// node timeout.
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
	if l.state != stateHeld {
		l.mu.Unlock()
		err := fmt.Errorf("%w: release %q: lock was already released, lost or never acquired", ErrNotHeld, l.keys)
		c.done(ctx, "release", l, begin, 0, quorum.Outcome{}, err, 0)
		return err
	}
	left := l.remaining()
	l.state = stateReleased
	rel := l.won.rel
	l.mu.Unlock()
	q := c.rel.next()
	for i := range c.nodes { // before Release can return: see releases
		c.rel.add(i, l.keys, q)
	}
	// The node calls do not end with ctx (roundWithin), nor does the wait.
	out := c.roundWithin(ctx, "release", c.releaseTimeout(l.ttl), c.need, nil, func(ctx context.Context, i int) (bool, error) {
		if !l.awaitAnswer(i) {
			c.rel.done(i, l.keys, q)
			return false, errNotSent // nothing of ours was written there
		}
		return c.release(ctx, i, l.keys, q, rel)
	}).Wait(context.Background())
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
				slog.String("client", c.id),
				slog.String("owner", shortOwner(l.owner)),
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

// shortOwner is the first 8 characters of an owner value's random part,
// enough to tell attempts apart in logs ("" before any attempt).
func shortOwner(v string) string {
	_, a := SplitOwner(v)
	if len(a) > 8 {
		a = a[:8]
	}
	return a
}
