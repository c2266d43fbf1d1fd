// Package topology runs the library against the node kinds
// docs/deployment.md promises beyond plain standalone servers: a Redis Cluster, a
// sentinel-managed master, a TLS port and an ACL user, all real
// redis-server processes started by the harness.
package topology

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
)

func TestMain(m *testing.M) {
	harness.QuietRedisLogs()
	if err := loadACLLines(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, harness.IgnoreRedisDial())
}

// Generous per-node timeout and TTL: the machine may be loaded, and no
// verdict here may depend on its speed (the node timeout is capped at a
// tenth of the TTL).
const (
	nodeTimeout = 5 * time.Second
	ttl         = time.Minute
)

// newClient returns a Client over clients that is closed when the test
// ends (before the clients themselves, which the caller closes through
// closeAll).
func newClient(t testing.TB, clients []redis.UniversalClient, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	c, err := redlock.New(clients, append([]redlock.Option{redlock.WithNodeTimeout(nodeTimeout)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// closeAll closes go-redis clients when the test ends.
func closeAll(t testing.TB, clients ...redis.UniversalClient) {
	t.Cleanup(func() {
		for _, c := range clients {
			_ = c.Close()
		}
	})
}

// get returns key's value on c ("" if absent).
func get(t testing.TB, c redis.Cmdable, key string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := c.Get(ctx, key).Result()
	if err != nil && err != redis.Nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v
}

// pttl returns key's remaining TTL on c.
func pttl(t testing.TB, c redis.Cmdable, key string) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	d, err := c.PTTL(ctx, key).Result()
	if err != nil {
		t.Fatalf("PTTL %s: %v", key, err)
	}
	return d
}

// absent fails the test if key exists on any of cs.
func absent(t testing.TB, key string, cs ...redis.Cmdable) {
	t.Helper()
	for i, c := range cs {
		if v := get(t, c, key); v != "" {
			t.Errorf("node %d holds %s = %q, want no key", i, key, v)
		}
	}
}
