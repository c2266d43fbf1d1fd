package redlock

import (
	"context"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
)

// Release deletes the lock on every node where it still holds our owner
// value; keys now held by someone else are left untouched, and a lock
// that was lost or ran past its deadline is cleaned up the same way.
//
// It first waits for the extension in flight (an Extend or a watchdog
// renewal, bounded by its node deadline), so that no extension reaches a
// node after the release, then ends the Lock (Done is closed, a watchdog
// stops). If a waiter of this Client wants the key (WithLocalHandoff) and
// the last round confirmed the quorum with validity to spare, the hold is
// handed to it with no round trip; otherwise the lock is deleted. It sends
// only to nodes that may hold the lock (not to those that refused the
// acquisition), to each after it answered the acquisition's command.
//
// It returns nil once a quorum confirmed the delete (or the hold was
// handed on). Otherwise the error matches ErrNotHeld (the lock had expired
// or was taken over, nodes failed, it was released already, or the Client
// was closed: then also ErrClosed) with every node's answer; if the lock
// was lost before Release (its validity ran out, or an extension found
// the quorum gone) it also matches ErrLockLost. Keys left on unreachable
// nodes expire with their TTL. Release runs even if ctx is already done,
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
		return fmt.Errorf("%w: release %s: %w: the lock stays until its TTL", ErrNotHeld, quoteKeys(l.keys), ErrClosed)
	}
	o := l.releaseEntered(ctx)
	c.report(ctx, o)
	return o.err
}

// releaseEntered is Release once the call entered the Client: it returns
// the release's event, reported by Release once the call has left.
func (l *Lock) releaseEntered(ctx context.Context) outcome {
	c := l.c
	defer c.exit() // also on a panic: Close must not wait for this call
	begin := c.o.clock.Now()
	over := c.runOver(l)
	left, ttl, again, lost, next := l.beginRelease(!over && c.mayHandOn(l))
	o := outcome{op: opRelease, keys: l.keys, owner: l.owner, lock: l, begin: begin, left: left}
	switch {
	case again:
		o.err = fmt.Errorf("%w: release %s: lock was already released", ErrNotHeld, quoteKeys(l.keys))
	case next != nil && c.handOn(l, next):
		o.passed = true
	default:
		o.err, o.round = l.deleteOnNodes(ctx, ttl, lost, over)
		o.attempts = 1
	}
	return o
}

// deleteOnNodes deletes l's owner value on every node that may hold it
// and wakes the waiters (over: l's run of passes is over), and returns
// Release's error (lost is the loss that ended l, if any) and the round.
func (l *Lock) deleteOnNodes(ctx context.Context, ttl time.Duration, lost error, over bool) (error, quorum.Outcome) {
	c := l.c
	q := c.rel.next()
	for i := range c.nodes { // before Release can return: see releases
		c.rel.add(i, l.keys, q)
	}
	announce := l.typ.release(l, true) // wakes the waiters (package handoff)
	var plain *node.Cmd                // for nodes that do not announce (cluster)
	for _, n := range c.nodes {
		if !n.Announces() {
			plain = l.typ.release(l, false)
			break
		}
	}
	left := l.typ.leftover(l)
	// The node calls do not end with ctx (roundWithin), nor does the wait.
	out := c.roundWithin(ctx, opRelease, c.releaseTimeout(ttl), c.need, func(ctx context.Context, i int) (int64, bool, error) {
		if !l.won.mayHold(c, i) {
			c.rel.done(i, l.keys, q)
			if left != nil {
				_, _, _ = c.nodes[i].DoValue(ctx, left) // best effort: what is left expires on its own
			}
			return 0, false, errNotSent // no hold of ours was written there
		}
		if c.nodes[i].Announces() {
			return c.release(ctx, i, l.keys, q, announce)
		}
		return c.release(ctx, i, l.keys, q, plain)
	}).Wait(context.Background())
	c.released(l, out.Reached, over)
	switch {
	case lost != nil:
		return fmt.Errorf("%w: release %s: %w", ErrNotHeld, quoteKeys(l.keys), lost), out
	case !out.Reached:
		return &QuorumError{Op: "release", Keys: l.keys, Need: c.need, Got: out.Yes, Attempts: 1,
			Nodes: c.results(out), Err: ErrNotHeld}, out
	}
	return nil, out
}
