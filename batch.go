package redlock

import (
	"context"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
)

// renewRound sends the renewals rs of the locks ls to every node at once, one
// node.ExtendMany (one round trip) each, and returns each lock's outcome
// as soon as every lock's is decided (quorum.StartBatch: each lock on its
// own quorum). Slower nodes are not waited for; their calls run on to
// their deadline, counted in c.wg so that Close waits for them. A batch's
// calls get the release deadline: it carries many locks, and no caller
// waits on it.
func (c *Client) renewRound(ls []*Lock, rs []node.Renewal, ttl time.Duration) []quorum.Outcome {
	ctx, cancel := context.WithTimeout(context.Background(), c.releaseTimeout(ttl))
	cfg := quorum.Config{N: len(c.nodes), Need: c.need, Track: &c.wg, Now: c.o.clock.Now, Finally: cancel, Counts: c.counts(opRenew)}
	if len(c.o.nodeObs) > 0 {
		cfg.Observe = func(i int, v quorum.Vote) { c.observeNode(ctx, opRenew, i, v) }
	}
	canSkip := c.canSkip(opRenew, c.need)
	return quorum.StartBatch(ctx, cfg, len(rs), func(ctx context.Context, i int, ok []bool, errs []error) {
		_, _, err := c.call(ctx, i, canSkip, func(ctx context.Context, i int) (int64, bool, error) {
			if err := c.beforeRenew(ctx, i, ttl); err != nil { // the restart quarantine's TTL register
				return 0, false, err
			}
			return inOrder(ctx, ls, i, func() (int64, bool, error) {
				return 0, true, c.nodes[i].ExtendMany(ctx, rs, ok, errs)
			})
		})
		if notSent(err) {
			for j := range errs {
				errs[j] = err
			}
		}
	})
}

// inOrder runs call (one node.ExtendMany carrying the renewals of ls) on
// node i after the previous extension call of each of ls there returned
// (see order); if ctx ends first it sends nothing.
func inOrder(ctx context.Context, ls []*Lock, i int, call func() (int64, bool, error)) (int64, bool, error) {
	mine := make([]chan struct{}, len(ls))
	var err error
	for j, l := range ls {
		var prev <-chan struct{}
		prev, mine[j] = l.order.enter(i)
		if err == nil {
			err = l.order.wait(ctx, prev, mine[j])
			if err != nil {
				mine[j] = nil // wait closes it after prev
			}
		} else if prev != nil {
			go func(prev <-chan struct{}, mine chan struct{}) { <-prev; close(mine) }(prev, mine[j])
			mine[j] = nil
		}
	}
	defer func() {
		for _, m := range mine {
			if m != nil {
				close(m)
			}
		}
	}()
	if err != nil {
		return 0, false, err
	}
	return call()
}
