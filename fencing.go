package redlock

import (
	"context"
	"errors"
	"time"

	"github.com/redlock-go/redlock/node"
	"github.com/redlock-go/redlock/quorum"
)

// WithFencing gives every lock of this Client a fencing token (Lock.Token):
// a number greater than the token of every earlier holder of any of its
// keys whose acquisition completed, for as long as the nodes keep their
// state (see SAFETY.md). The protected resource records the highest token
// it has seen and refuses writes that carry a lower one (package fence,
// and the SQL pattern there), so that a holder paused past its deadline
// cannot overwrite what the next holder wrote. Default: off.
//
// Each key's token comes from a max-register kept on every node under
// FenceKey(key), with no expiry. The acquisition script reads and raises
// it on each node that grants the lock; the token is the highest value a
// quorum returned, and it is handed out only once a quorum holds it. When
// the granting nodes already agree (the usual case) that costs nothing
// more; otherwise one more round trip raises the lower ones, only on nodes
// where the lock is still held. A lock with fencing is never passed
// between waiters inside the Client (WithLocalHandoff): every holder gets
// its own token.
func WithFencing() Option { return func(o *options) { o.fencing = true } }

// FenceKey returns the key of the fence register of lock key k: k with the
// suffix ":fence", and k in braces when k has no hash tag, so that on a
// Redis Cluster the register shares k's hash slot. Inspect it with GET.
func FenceKey(k string) string {
	if _, ok := node.HashTag(k); ok {
		return k + ":fence"
	}
	return "{" + k + "}:fence"
}

func fenceKeys(keys []string) []string {
	f := make([]string, len(keys))
	for i, k := range keys {
		f[i] = FenceKey(k)
	}
	return f
}

// ErrFenceNotRaised is the per-node error of a fenced acquisition whose
// lock had already expired on that node when its fence register was to be
// raised to the token: that node's vote does not count, and the attempt
// fails if too few remain.
var ErrFenceNotRaised = errors.New("redlock: fence register not raised: the lock was no longer held on the node")

// fence makes the token of fenced attempt a, whose round reached a quorum
// (out): the highest candidate among the counted yes votes. Counted yes
// nodes that returned less are raised to it until a quorum holds it. It
// returns the token, or 0 and the outcome to report when no quorum could
// be made to hold it (the attempt then fails and is undone).
func (c *Client) fence(ctx context.Context, keys []string, ttl time.Duration, a *attempt, out quorum.Outcome) (int64, quorum.Outcome) {
	var top int64
	for _, v := range out.Votes {
		if v.OK && !v.Discounted && v.Value > top {
			top = v.Value
		}
	}
	held, low := 0, uint64(0)
	for i, v := range out.Votes {
		switch {
		case !v.OK || v.Discounted:
		case v.Value == top:
			held++
		default:
			low |= 1 << i
		}
	}
	if held >= c.need {
		return top, out
	}
	raise := node.RaiseFence(keys, a.fences, a.owner, top)
	r := c.round(ctx, opAcquire, ttl, c.need-held, func(ctx context.Context, i int) (int64, bool, error) {
		if low&(1<<i) == 0 {
			return 0, false, errNotSent
		}
		ok, err := c.nodes[i].Do(ctx, raise)
		if err == nil && !ok {
			err = ErrFenceNotRaised
		}
		return 0, ok, err
	}).Wait(ctx)
	if r.Reached && r.Err == nil {
		return top, out
	}
	fail := quorum.Outcome{Votes: append([]quorum.Vote(nil), out.Votes...), Yes: held + r.Yes, Err: r.Err}
	for i := range fail.Votes {
		if low&(1<<i) != 0 {
			fail.Votes[i] = r.Votes[i]
		}
	}
	return 0, fail
}
