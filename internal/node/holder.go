package node

import (
	"context"
	"strings"
	"time"

	"github.com/redlock-go/redlock/transport"
)

// Holding is what a node holds under a key now (see Holder).
type Holding struct {
	Value string        // the key's string value; "" if absent or not a string (a typed lock, other data)
	Left  time.Duration // its PTTL; 0 if absent, without an expiry, or unknown (PTTL refused)
	Other bool          // the key holds another type (a typed lock, other data)
}

// Holder reads key on the node: GET and PTTL in one round trip. It
// writes nothing. A key of another type is not an error (Value ""); a
// refused PTTL (an ACL without it) leaves Left 0. It returns GET's error
// otherwise. Like Do, it returns by ctx's deadline also on a client that
// ignores ctx deadlines. Safe for concurrent use.
func (n *Node) Holder(ctx context.Context, key string) (Holding, error) {
	if !n.deadlineGuard {
		return n.holder(ctx, key)
	}
	return deadlineGuard(ctx, n.track, func() (Holding, error) { return n.holder(ctx, key) })
}

func (n *Node) holder(ctx context.Context, key string) (Holding, error) {
	rs := make([]transport.Reply, 2)
	n.conn.Pipeline(ctx, [][]interface{}{{"get", key}, {"pttl", key}}, rs)
	v, err := rs[0].Val, rs[0].Err
	switch {
	case err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE"):
		return Holding{Other: true}, nil
	case err != nil:
		return Holding{}, err
	case v == nil:
		return Holding{}, nil
	}
	s, err := toStr(v)
	if err != nil {
		return Holding{}, err
	}
	h := Holding{Value: s}
	if ms, err := toInt(rs[1].Val); rs[1].Err == nil && err == nil && ms > 0 {
		h.Left = time.Duration(ms) * time.Millisecond
	}
	return h, nil
}
