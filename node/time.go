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
	if !n.guard {
		return n.client.Time(ctx).Result()
	}
	type result struct {
		t   time.Time
		err error
	}
	ch := make(chan result, 1)
	if n.track != nil {
		n.track.Add(1)
	}
	go func() {
		if n.track != nil {
			defer n.track.Done()
		}
		t, err := n.client.Time(ctx).Result()
		ch <- result{t, err}
	}()
	select {
	case r := <-ch:
		return r.t, r.err
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}
