package node

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
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
	var get *redis.StringCmd
	var ttl *redis.DurationCmd
	_, perr := n.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, key)
		ttl = p.PTTL(ctx, key)
		return nil
	})
	v, err := get.Result()
	switch {
	case errors.Is(err, redis.Nil):
		return Holding{}, nil
	case err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE"):
		return Holding{Other: true}, nil
	case err != nil:
		return Holding{}, err
	case v == "" && perr != nil:
		return Holding{}, perr
	}
	h := Holding{Value: v}
	if d, err := ttl.Result(); err == nil && d > 0 {
		h.Left = d
	}
	return h, nil
}
