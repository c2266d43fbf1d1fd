package redlock

import (
	"context"

	"github.com/redlock-go/redlock/internal/handoff"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/observe"
)

// plain is the plain lock: one holder, a string key per node (SET NX, or
// lock.lua for several keys and for clients that may send twice). A key
// that holds anything else, a typed lock or data, is held: a plain call
// waits for it (or fails with ErrNotObtained), never ErrWrongType. The
// other types embed it.
type plain struct{}

func (plain) is() traits {
	return traits{kind: observe.KindPlain, tryFirst: true, runs: true, foreign: true}
}

func (plain) check(*Client, *request) error { return nil }

func (plain) enter(r *request, parent *Lock) error { return heldByCaller(r, parent) }

func (plain) attempt(ctx context.Context, c *Client, r *request, n int) (result, error) {
	return c.attemptKeys(ctx, r, r.keys, n)
}

func (plain) command(c *Client, r *request, keys []string, owner string) (cmd, again *node.Cmd) {
	cmd = node.LockNew(keys, owner, r.ttl)
	if c.retries && len(keys) == 1 {
		return cmd, node.Lock(keys, owner, r.ttl) // a SET NX sent twice would say no
	}
	return cmd, cmd
}

func (plain) won(_ context.Context, _ *Client, _ *request, _ []string, _ string, out quorum.Outcome) (int64, quorum.Outcome) {
	return 0, out
}

func (plain) refused(quorum.Outcome) error { return nil }

func (plain) queue(_ context.Context, w *wait) (*handoff.Turn, func(*Lock), error) {
	c, q := w.c, w.key
	return c.hub.EnterWant(q, *w.r), func(*Lock) { c.leftRace(q) }, nil
}

func (plain) waitKey(key string) string { return key }

func (plain) release(l *Lock, announce bool) *node.Cmd {
	return node.Release(l.keys, l.owner, announce)
}

func (plain) leftover(*Lock) *node.Cmd { return nil }
