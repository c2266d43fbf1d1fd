package redlock

import (
	"context"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/spec"
	"github.com/redlock-go/redlock/observe"
)

// WithFencing gives every lock of this Client a fencing token (Lock.Token):
// a number greater than the token of every earlier holder of any of its
// keys whose acquisition completed, as long as the node clocks do not step
// back and differ from each other by less than admin.FenceMargin.
// The protected resource records the highest token and the holder that
// wrote with it, and refuses writes that carry a lower token, or the same
// token from another holder (package fence, and the SQL pattern there),
// so that a holder paused past its deadline cannot overwrite what the next
// holder wrote. Default: off.
//
// Each key's token comes from a max-register kept on every node under
// admin.FenceKey(key). The acquisition script reads and raises it on each node
// that grants the lock, to the node's candidate: one more than the
// register, and at least the node's clock (TIME) in microseconds. The
// token is the highest candidate a quorum returned, and it is handed out
// only once a quorum holds it. When the granting nodes already agree (the
// usual case) that costs nothing more; otherwise one more round trip
// raises the lower ones, only on nodes where the lock is still held.
//
// Registers expire, so that locks of many distinct keys do not fill the
// nodes: each write gives the register at least the lock's TTL plus
// admin.FenceMargin to live, never shortening what it has. A holder that finds
// the register expired still gets a larger token, from the clock floor:
// the earlier token was at most the highest node clock during the earlier
// acquisition, which lasted less than its TTL, and the register outlived
// that by admin.FenceMargin on the node's own clock, more than the clocks
// differ. A register lost in a restart without persistence is covered by
// the floor when more time passed since the earlier acquisition than the
// node clocks differ (SAFETY.md).
//
// A lock with fencing is never passed between waiters inside the Client
// (WithLocalHandoff): every holder gets its own token. Tokens are large
// (microseconds since 1970): an SQL column for them needs 64 bits.
func WithFencing() LockOption { return callOption(func(o *callOptions) { o.fencing = true }) }

// fenceTTL is the TTL a fenced acquisition of ttl gives its registers.
func fenceTTL(ttl time.Duration) time.Duration { return ttl + fenceMargin }

// fenceKey is the key of the fence register of lock key k
// (admin.FenceKey).
func fenceKey(k string) string { return spec.FenceKey(k) }

// fenced is a plain lock with a fencing token (WithFencing): its script
// raises the keys' fence registers as it grants, and the token is made
// from a quorum's candidates (fence). It is never handed on locally:
// every holder gets a token of its own.
type fenced struct{ plain }

// check refuses, on a cluster, a key whose fence register would be in
// another hash slot.
func (fenced) check(c *Client, r *request) error {
	for _, k := range r.keys {
		if c.cluster && node.Slot(fenceKey(k)) != node.Slot(k) {
			return invalid("key %s: its fence register would be in another cluster hash slot; use a {hash tag}", shortKey(k))
		}
	}
	return nil
}

func (fenced) command(_ *Client, r *request, keys []string, owner string) (cmd, again *node.Cmd) {
	cmd = node.LockFenced(keys, fenceKeys(keys), owner, r.ttl, fenceTTL(r.ttl))
	return cmd, cmd
}

func (fenced) won(ctx context.Context, c *Client, r *request, keys []string, owner string, out quorum.Outcome) (int64, quorum.Outcome) {
	return c.fence(ctx, keys, r.ttl, owner, out)
}

func (fenced) is() traits { return traits{kind: observe.KindPlain, tryFirst: true, foreign: true} }

func fenceKeys(keys []string) []string {
	f := make([]string, len(keys))
	for i, k := range keys {
		f[i] = fenceKey(k)
	}
	return f
}

// fence makes the token of the fenced attempt of owner, whose round reached a quorum
// (out): the highest candidate among the counted yes votes. Counted yes
// nodes that returned less are raised to it until a quorum holds it. It
// returns the token, or 0 and the outcome to report when no quorum could
// be made to hold it (the attempt then fails and is undone).
func (c *Client) fence(ctx context.Context, keys []string, ttl time.Duration, owner string, out quorum.Outcome) (int64, quorum.Outcome) {
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
	raise := node.RaiseFence(keys, fenceKeys(keys), owner, top, fenceTTL(ttl))
	r := c.round(ctx, opAcquire, ttl, c.need-held, func(ctx context.Context, i int) (int64, bool, error) {
		if low&(1<<i) == 0 {
			return 0, false, errNotSent
		}
		ok, err := c.nodes[i].Do(ctx, raise)
		if err == nil && !ok {
			err = observe.ErrFenceNotRaised
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
