// Package node talks to one Redis node: it runs the lock, extend and release
// scripts there, each bounded by its context's deadline.
package node

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lock.lua
	lockSrc string
	//go:embed extend.lua
	extendSrc string
	//go:embed release.lua
	releaseSrc string
)

// Scripts are immutable after creation; Run uses EVALSHA and falls back to
// EVAL when the node answers NOSCRIPT (after a restart or SCRIPT FLUSH).
var (
	lockScript    = redis.NewScript(lockSrc)
	extendScript  = redis.NewScript(extendSrc)
	releaseScript = redis.NewScript(releaseSrc)
)

// Node is one Redis master. It is safe for concurrent use.
type Node struct {
	client redis.UniversalClient
	addr   string
	// guard is set when the client ignores ctx deadlines
	// (ContextTimeoutEnabled false): the deadline is then enforced here,
	// and the command finishes in the background on the client's own
	// socket timeout.
	guard bool
	track Tracker
}

// Tracker counts commands in flight (a *sync.WaitGroup is one).
type Tracker interface {
	Add(delta int)
	Done()
}

// New wraps client. Every call returns by ctx's deadline, which the caller
// sets. track, if not nil, counts commands that outlive their deadline
// (clients that ignore ctx deadlines only).
func New(client redis.UniversalClient, track Tracker) *Node {
	return &Node{
		client: client,
		addr:   Addr(client),
		guard:  !HonorsContext(client),
		track:  track,
	}
}

// Addr returns the address this node reports in errors and logs.
func (n *Node) Addr() string { return n.addr }

// Acquire sets keys to value with ttl if each is free or already ours. It
// reports whether the node granted the lock. An error means the outcome is
// unknown: the script may have run.
func (n *Node) Acquire(ctx context.Context, keys []string, value string, ttl time.Duration) (bool, error) {
	v, err := n.run(ctx, lockScript, keys, value, ttl.Milliseconds())
	return v == 1, err
}

// AcquireNew is Acquire for an owner value that no node can hold yet (the
// first attempt of an acquisition): a single key then needs only SET NX PX,
// cheaper for the node than the script.
func (n *Node) AcquireNew(ctx context.Context, keys []string, value string, ttl time.Duration) (bool, error) {
	if len(keys) != 1 {
		return n.Acquire(ctx, keys, value, ttl)
	}
	if !n.guard {
		return n.client.SetNX(ctx, keys[0], value, ttl).Result()
	}
	v, err := n.guarded(ctx, func(ctx context.Context) (int64, error) {
		ok, err := n.client.SetNX(ctx, keys[0], value, ttl).Result()
		if ok {
			return 1, err
		}
		return 0, err
	})
	return v == 1, err
}

// Extend resets the TTL of keys to ttl if they all still hold value.
func (n *Node) Extend(ctx context.Context, keys []string, value string, ttl time.Duration) (bool, error) {
	v, err := n.run(ctx, extendScript, keys, value, ttl.Milliseconds())
	return v == 1, err
}

// Release deletes the keys that still hold value and reports whether all of
// them did.
func (n *Node) Release(ctx context.Context, keys []string, value string) (bool, error) {
	return n.ReleaseArgs(ctx, keys, []interface{}{value})
}

// ReleaseArgs is Release with the owner value already boxed as
// []interface{}{value}, so a caller releasing on many nodes boxes it once.
func (n *Node) ReleaseArgs(ctx context.Context, keys []string, args []interface{}) (bool, error) {
	v, err := n.run(ctx, releaseScript, keys, args...)
	return err == nil && v == int64(len(keys)), err
}

func (n *Node) run(ctx context.Context, s *redis.Script, keys []string, args ...interface{}) (int64, error) {
	if !n.guard {
		return s.Run(ctx, n.client, keys, args...).Int64()
	}
	return n.guarded(ctx, func(ctx context.Context) (int64, error) {
		return s.Run(ctx, n.client, keys, args...).Int64()
	})
}

// guarded runs cmd on its own goroutine and returns by ctx's deadline even
// if the client ignores it; cmd then ends on the client's socket timeout.
func (n *Node) guarded(ctx context.Context, cmd func(context.Context) (int64, error)) (int64, error) {
	type result struct {
		v   int64
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
		v, err := cmd(ctx)
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// HonorsContext reports whether client applies ctx deadlines to its socket
// reads and writes (go-redis does only with ContextTimeoutEnabled).
// Unknown client types are assumed not to.
func HonorsContext(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// Addr names client by the server(s) it talks to, for errors, logs and the
// duplicate check. Clients whose target cannot be read (sentinel failover
// clients, unknown types) are named by identity.
func Addr(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		o := c.Options()
		if o.Addr == "FailoverClient" {
			break
		}
		if o.DB != 0 {
			return fmt.Sprintf("%s/%d", o.Addr, o.DB)
		}
		return o.Addr
	case *redis.ClusterClient:
		a := append([]string(nil), c.Options().Addrs...)
		sort.Strings(a)
		return "cluster:" + strings.Join(a, ",")
	case *redis.Ring:
		var a []string
		for _, v := range c.Options().Addrs {
			a = append(a, v)
		}
		sort.Strings(a)
		return "ring:" + strings.Join(a, ",")
	}
	return fmt.Sprintf("%T@%p", c, c)
}

// IsTimeout reports whether err is a deadline or socket timeout.
func IsTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
