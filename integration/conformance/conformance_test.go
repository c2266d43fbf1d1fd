// Package conformance runs redlocktest's conformance checks against real
// redis-server processes, so that redlocktest's in-process Cluster cannot
// drift from what the Client does on real nodes.
package conformance

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/redlocktest"
)

func TestMain(m *testing.M) {
	harness.QuietRedisLogs()
	goleak.VerifyTestMain(m, harness.IgnoreRedisDial())
}

// TestConformance: the same checks as redlocktest's own test of the
// Cluster. Time passes by sleeping, with a TTL of 1s: long next to a round
// trip on a loaded machine, so no verdict depends on its speed.
func TestConformance(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	env := redlocktest.Env{
		Client: func(opts ...redlock.Option) *redlock.Client {
			c, err := redlock.NewFromURLs(harness.URLs(nodes), append([]redlock.Option{redlock.WithNodeTimeout(300 * time.Millisecond)}, opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			return c
		},
		Advance: time.Sleep,
		Lose: func(key string) {
			for _, n := range nodes {
				cl := n.Client()
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				err := cl.Del(ctx, key).Err()
				cancel()
				_ = cl.Close()
				if err != nil {
					t.Fatalf("DEL on %s: %v", n.Addr, err)
				}
			}
		},
		TTL: time.Second,
	}
	redlocktest.Conformance(t, env)
}
