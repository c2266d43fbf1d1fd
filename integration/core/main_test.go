// Package core tests the redlock library against real redis-server
// processes started by the harness.
package core

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/internal/node"
)

func TestMain(m *testing.M) {
	harness.QuietRedisLogs()
	goleak.VerifyTestMain(m, append(harness.IgnoreRedial(), harness.IgnoreRedisDial())...)
}

// setup starts n fresh nodes and a Client over them.
func setup(t testing.TB, n int, opts ...redlock.Option) (*redlock.Client, []*harness.Node) {
	t.Helper()
	nodes := harness.Start(t, n, harness.Config{})
	return client(t, nodes, opts...), nodes
}

func client(t testing.TB, nodes []*harness.Node, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	// A node timeout that a loaded machine (-race, CPU hogs beside it) does
	// not reach on a healthy node; tests of timeouts set their own (later
	// options win).
	c, err := harness.NewClient(t, harness.URLs(nodes), append([]redlock.Option{redlock.WithNodeTimeout(time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// raw reads key on every node directly, as it is now: value ("" if
// absent) and PTTL. Calls may still be finishing in the background
// (Release and Extend return at quorum, a failed attempt is undone on late
// nodes when they answer): close the Client first (Close waits for them),
// or poll with rawUntil.
func raw(t testing.TB, nodes []*harness.Node, key string) ([]string, []time.Duration) {
	t.Helper()
	vals := make([]string, len(nodes))
	ttls := make([]time.Duration, len(nodes))
	for i, n := range nodes {
		c := n.Client()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		v, err := c.Get(ctx, key).Result()
		if err != nil && err != redis.Nil {
			t.Fatalf("GET on %s: %v", n.Addr, err)
		}
		vals[i] = v
		ttls[i], _ = c.PTTL(ctx, key).Result()
		cancel()
		c.Close()
	}
	return vals, ttls
}

// rawUntil reads key on every node until ok accepts what they hold or
// until is reached, and returns the last reading. For checks that must wait
// for calls still in flight while the Client stays open; until must come
// before any key the check is about could expire by its TTL, so that a
// key left behind cannot expire into a pass.
func rawUntil(t testing.TB, nodes []*harness.Node, key string, until time.Time, ok func(vals []string, ttls []time.Duration) bool) ([]string, []time.Duration) {
	t.Helper()
	for {
		vals, ttls := raw(t, nodes, key)
		if ok(vals, ttls) || time.Now().After(until) {
			return vals, ttls
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func set(t testing.TB, n *harness.Node, key, val string, ttl time.Duration) {
	t.Helper()
	c := n.Client()
	defer c.Close()
	if err := c.Set(context.Background(), key, val, ttl).Err(); err != nil {
		t.Fatal(err)
	}
}

func count(vals []string, want string) int {
	k := 0
	for _, v := range vals {
		if v == want {
			k++
		}
	}
	return k
}

// lockKeys returns the keys on node n but the Clients' TTL register
// (node.TTLRegisterKey, one per node; it expires with its latest entry):
// what locks and fence registers left.
func lockKeys(ctx context.Context, n *harness.Node) ([]string, error) {
	cl := n.Client()
	defer cl.Close()
	all, err := cl.Keys(ctx, "*").Result()
	keys := all[:0]
	for _, k := range all {
		if k != node.TTLRegisterKey && k != node.MaxTTLKey && k != node.AOFStampKey {
			keys = append(keys, k)
		}
	}
	return keys, err
}
