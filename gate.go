package redlock

import (
	"context"
	"time"
)

// A gate decides whether a node's yes counts toward the quorum right now
// (restart quarantine, a second address of one server, clock drift). A
// discounted node still receives every command, so that what it holds is
// known and released, but its vote is not counted until the gate clears.
type gate interface {
	// discount returns why node i's yes does not count now, or nil.
	discount(i int) error
}

// A callGate is a gate that also runs around each command that may grant
// or keep a lock (acquisitions, Extend, watchdog renewals): the restart
// quarantine, which must identify a node and publish the command's TTL
// before the command, and check after it that the node did not restart
// meanwhile.
type callGate interface {
	gate
	// prepare runs before a round for ttl, on the caller's goroutine.
	prepare(ctx context.Context, ttl time.Duration)
	// before runs on node i's goroutine before a command with ttl, within
	// its deadline (ctx): an error (a not-sent error) keeps the command
	// from being sent. Its mark is handed to after.
	before(ctx context.Context, i int, ttl time.Duration) (mark uint64, err error)
	// renew runs on node i's goroutine before a watchdog renewal with
	// ttl: an error keeps the renewal from being sent there.
	renew(ctx context.Context, i int, ttl time.Duration) error
	// after runs once an acquisition's command returned; it may turn a
	// yes into one that does not count (still held on the node: undone).
	after(ctx context.Context, i int, mark uint64, ok bool, err error) (bool, error)
}

// prepare, before and after run the Client's callGate, if any.
func (c *Client) prepare(ctx context.Context, ttl time.Duration) {
	if c.around != nil {
		c.around.prepare(ctx, ttl)
	}
}

func (c *Client) before(ctx context.Context, i int, ttl time.Duration) (uint64, error) {
	if c.around == nil {
		return 0, nil
	}
	return c.around.before(ctx, i, ttl)
}

// beforeRenew runs the callGate's renew, if any.
func (c *Client) beforeRenew(ctx context.Context, i int, ttl time.Duration) error {
	if c.around == nil {
		return nil
	}
	return c.around.renew(ctx, i, ttl)
}

func (c *Client) after(ctx context.Context, i int, mark uint64, ok bool, err error) (bool, error) {
	if c.around == nil {
		return ok, err
	}
	return c.around.after(ctx, i, mark, ok, err)
}

// discount returns why node i's yes does not count toward a quorum now,
// from the first gate that refuses it, or nil.
func (c *Client) discount(i int) error {
	for _, g := range c.gates {
		if err := g.discount(i); err != nil {
			return err
		}
	}
	return nil
}

// counts is quorum.Config.Counts for rounds that grant or keep a lock:
// nil for releases and when no gate is configured, so that a round asks
// nothing.
func (c *Client) counts(o op) func(int) bool {
	if o == opRelease {
		return nil
	}
	return c.countsFn
}
