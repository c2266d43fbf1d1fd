package node

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// MaxTTLKey is the register, one per node, that holds the longest TTL (in
// milliseconds) any client has announced it uses on the node: the window a
// node that restarted empty must stay out of quorums.
const MaxTTLKey = "redlock:max-ttl"

var (
	//go:embed max_ttl.lua
	maxTTLSrc    string
	maxTTLScript = redis.NewScript(maxTTLSrc)
)

// RaiseMaxTTL raises the node's MaxTTLKey register to ttl, never lowering
// it; the node says yes once it holds at least ttl.
func RaiseMaxTTL(ttl time.Duration) *Cmd {
	return scriptCmd(maxTTLScript, maxTTLSrc, []string{MaxTTLKey}, 1, ttl.Milliseconds())
}

// MaxTTL reads the node's MaxTTLKey register: 0 when it is unset. Like Do,
// it returns by ctx's deadline also on a client that ignores ctx deadlines.
func (n *Node) MaxTTL(ctx context.Context) (time.Duration, error) {
	read := func() (time.Duration, error) {
		s, err := n.client.Get(ctx, MaxTTLKey).Result()
		if err == redis.Nil {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil || ms < 0 {
			return 0, fmt.Errorf("redlock/node: %s holds %q, not a TTL in milliseconds", MaxTTLKey, s)
		}
		return time.Duration(ms) * time.Millisecond, nil
	}
	if !n.guard {
		return read()
	}
	return guard(ctx, n.track, read)
}
