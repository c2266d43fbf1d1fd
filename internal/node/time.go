package node

import (
	"context"
	"fmt"
	"time"
)

// Time runs TIME on the node and returns its clock (microsecond
// resolution). Like Do, it returns by ctx's deadline also on a client that
// ignores ctx deadlines; the command then ends in the background on the
// client's socket timeout, counted by the node's Tracker. On a cluster
// client TIME reaches an arbitrary shard.
func (n *Node) Time(ctx context.Context) (time.Time, error) {
	if !n.deadlineGuard {
		return n.time(ctx)
	}
	return deadlineGuard(ctx, n.track, func() (time.Time, error) { return n.time(ctx) })
}

func (n *Node) time(ctx context.Context) (time.Time, error) {
	v, err := n.conn.Do(ctx, "time")
	if err != nil {
		return time.Time{}, err
	}
	return parseTime(v)
}

// parseTime reads TIME's reply: seconds and microseconds, as strings.
func parseTime(v any) (time.Time, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return time.Time{}, fmt.Errorf("redlock: node: TIME replied %v", v)
	}
	sec, err1 := toInt(a[0])
	usec, err2 := toInt(a[1])
	if err1 != nil || err2 != nil {
		return time.Time{}, fmt.Errorf("redlock: node: TIME replied %v", v)
	}
	return time.Unix(sec, usec*1000), nil
}
