package node

import (
	"context"
	"time"
)

// Time runs TIME on the node and returns its clock (microsecond
// resolution). Like Do, it returns by ctx's deadline also on a client that
// ignores ctx deadlines; the command then ends in the background on the
// client's socket timeout, counted by the node's Tracker. On a cluster
// client TIME reaches an arbitrary shard.
func (n *Node) Time(ctx context.Context) (time.Time, error) {
	if !n.deadlineGuard {
		return n.client.Time(ctx).Result()
	}
	return deadlineGuard(ctx, n.track, func() (time.Time, error) { return n.client.Time(ctx).Result() })
}
