package redlock

import (
	"context"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
)

// renewRound sends the renewals rs to every node at once, one
// node.ExtendMany (one round trip) each, and returns each lock's outcome
// as soon as every lock's is decided (quorum.StartBatch: each lock on its
// own quorum). Slower nodes are not waited for; their calls run on to
// their deadline, counted in c.wg so that Close waits for them. A batch's
// calls get the release deadline: it carries many locks, and no caller
// waits on it.
func (c *Client) renewRound(rs []node.Renewal, ttl time.Duration) []quorum.Outcome {
	ctx, cancel := context.WithTimeout(context.Background(), c.releaseTimeout(ttl))
	cfg := quorum.Config{N: len(c.nodes), Need: c.need, Track: &c.wg, Now: c.o.clock.Now, Finally: cancel, Counts: c.counts(opRenew)}
	if len(c.o.nodeObs) > 0 {
		cfg.Observe = func(i int, v quorum.Vote) { c.observeNode(ctx, opRenew, i, v) }
	}
	canSkip := c.canSkip(opRenew, c.need)
	return quorum.StartBatch(ctx, cfg, len(rs), func(ctx context.Context, i int, ok []bool, errs []error) {
		_, _, err := c.call(ctx, i, canSkip, func(ctx context.Context, i int) (int64, bool, error) {
			return 0, true, c.nodes[i].ExtendMany(ctx, rs, ok, errs)
		})
		if notSent(err) {
			for j := range errs {
				errs[j] = err
			}
		}
	})
}
