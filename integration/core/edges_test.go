package core

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
)

// keptOut fails the test if c obtains key in any of its tries over d.
func keptOut(t *testing.T, c *redlock.Client, key string, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		l, err := c.TryLock(ctx, key, 2*time.Second)
		if err == nil {
			_ = l.Release(ctx)
			t.Fatalf("a second holder of %s: the first one's lock is still valid", key)
		}
		if !errors.Is(err, redlock.ErrNotObtained) {
			t.Fatalf("TryLock(%s): %v", key, err)
		}
	}
}

// proxies starts one proxy per node (keeping ones if keep) and returns
// them and their URLs.
func proxies(t *testing.T, nodes []*harness.Node, keep bool) ([]*harness.Proxy, []string) {
	t.Helper()
	ps, urls := make([]*harness.Proxy, len(nodes)), make([]string, len(nodes))
	for i, n := range nodes {
		addr := n.Addr
		var err error
		if keep {
			ps[i], err = harness.NewKeepingProxy(func() string { return addr })
		} else {
			ps[i], err = harness.NewProxy(func() string { return addr })
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ps[i].Close)
		urls[i] = ps[i].URL()
	}
	return ps, urls
}

// A register publish answered once with an error reply (the node out of
// memory, a failed snapshot, still loading, a busy script) keeps that
// node's vote from counting in that call only: the next call publishes
// again. The scenario: A reaches node 2 not at all while it takes a 10 s
// lock, so its quorum is nodes 0 and 1; node 0 restarts empty. B, which
// knew node 0's old process, must stay out: node 0's window is read from
// the witnesses 1 and 2, and only node 1 can carry A's TTL. Had node 1's
// earlier refusal kept A from ever publishing there again, the window
// would be empty and B would hold the key with nodes 0 and 2.
func TestRegisterTransientErrorsDoNotUnprotect(t *testing.T) {
	for _, reply := range []string{
		"OOM command not allowed when used memory > 'maxmemory'.",
		"MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk.",
		"LOADING Redis is loading the dataset in memory",
		"BUSY Redis is busy running a script.",
	} {
		t.Run(reply[:4], func(t *testing.T) {
			ctx := context.Background()
			nodes := harness.Start(t, 3, harness.Config{})
			ps, urls := proxies(t, nodes, false)
			a, err := harness.NewClient(t, []string{nodes[0].URL(), urls[1], urls[2]}, redlock.WithNodeTimeout(300*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = a.Close() })
			b := client(t, nodes)
			for _, c := range []*redlock.Client{a, b} { // both know every node's process
				l, err := c.TryLock(ctx, "edge:warm", time.Second) // short: its entries must not cover A's lock
				if err != nil {
					t.Fatal(err)
				}
				_ = l.Release(ctx)
			}
			ps[1].InjectError("redlock:ttl", reply)
			l, err := a.TryLock(ctx, "edge:refused", 1500*time.Millisecond) // a TTL not published yet: the publish is due
			if err != nil {
				t.Fatal(err)
			}
			_ = l.Release(ctx)
			if ps[1].Injecting() {
				t.Fatal("the publish to node 1 was not answered with the error reply")
			}
			ps[2].Set(harness.Refuse)
			held, err := a.TryLock(ctx, "edge:k", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			ps[2].Heal()
			if err := nodes[0].Restart(); err != nil {
				t.Fatal(err)
			}
			keptOut(t, b, "edge:k", 5*time.Second) // past every entry but A's 10 s one
			if time.Until(held.Deadline()) < time.Second {
				t.Fatalf("the check ran past A's validity")
			}
		})
	}
}

// A proxy or sidecar that keeps the Client's connection while the server
// behind it restarts empty: the Client sees no new connection, and only
// the vote itself can tell it that the node is another process now. B
// reaches the nodes through such proxies. Minority: A holds a 10 s lock on
// a bare quorum (nodes 3 and 4 unreachable for A), then nodes 0 and 1
// restart empty, so that 0, 1, 3 and 4 hold nothing. Majority: A holds on
// all five, nodes 0, 1 and 2 restart empty. In both B must stay out; with
// the quarantine off it takes the key (the scenario's sanity twin).
func TestRestartBehindConnectionKeepingProxy(t *testing.T) {
	for _, tc := range []struct {
		name      string
		restart   []int
		unreached []int
		off       bool
	}{
		{"minority", []int{0, 1}, []int{3, 4}, false},
		{"majority", []int{0, 1, 2}, nil, false},
		{"majority, quarantine off", []int{0, 1, 2}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			nodes := harness.Start(t, 5, harness.Config{})
			_, keptURLs := proxies(t, nodes, true)
			aps, aURLs := proxies(t, nodes, false)
			a, err := harness.NewClient(t, aURLs, redlock.WithNodeTimeout(300*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = a.Close() })
			opts := []redlock.Option{redlock.WithNodeTimeout(300 * time.Millisecond)}
			if tc.off {
				opts = append(opts, redlock.WithRestartQuarantine(redlock.QuarantineOff))
			}
			b, err := harness.NewClient(t, keptURLs, opts...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			// Lock, not TryLock: a loaded machine misses a 300 ms node
			// deadline now and then, and a retry gets the lock.
			lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			warm, err := b.Lock(lctx, "kept:warm", time.Second)
			if err != nil {
				t.Fatal(err)
			}
			_ = warm.Release(ctx)
			for _, i := range tc.unreached {
				aps[i].Set(harness.Refuse)
			}
			held, err := a.Lock(lctx, "kept:k", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			for _, i := range tc.unreached {
				aps[i].Heal()
			}
			for _, i := range tc.restart {
				if err := nodes[i].Restart(); err != nil {
					t.Fatal(err)
				}
			}
			if tc.off {
				l, err := b.TryLock(ctx, "kept:k", 2*time.Second)
				if err != nil {
					t.Fatalf("quarantine off: want the double grant the test guards against, got %v", err)
				}
				_ = l.Release(ctx)
				return
			}
			keptOut(t, b, "kept:k", 2*time.Second)
			if time.Until(held.Deadline()) < time.Second {
				t.Fatalf("the check ran past A's validity")
			}
			if s := b.Stats().Quarantine; s.Started < uint64(len(tc.restart)) {
				t.Errorf("quarantines begun %d, want one per restarted node (%d): %+v", s.Started, len(tc.restart), s)
			}
		})
	}
}

// A refusal that no retry can change ends Lock at its first attempt, with
// that refusal, instead of retrying until its ctx ends: durable votes on a
// server without WAITAOF (Redis 7.0 here: skipped where the default server
// has it), a user whose ACL lacks INFO. A refusal of a minority does not
// end the call (the others can still make the quorum).
func TestIncurableRefusalEndsTheCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nodes := harness.Start(t, 3, harness.Config{})
	attempts := func(t *testing.T, c *redlock.Client, key string) (int, error) {
		t.Helper()
		_, err := c.Lock(ctx, key, time.Second)
		var qe *redlock.QuorumError
		if !errors.Is(err, redlock.ErrNotObtained) || !errors.As(err, &qe) {
			t.Fatalf("Lock: %v, want a QuorumError", err)
		}
		return qe.Attempts, err
	}
	t.Run("durable votes without WAITAOF", func(t *testing.T) {
		if harness.HasWAITAOF(mustServerPath(t)) {
			t.Skip("the default server has WAITAOF")
		}
		c := client(t, nodes, redlock.WithDurableVotes())
		if n, err := attempts(t, c, "incurable:waitaof"); n != 1 || !strings.Contains(err.Error(), "waitaof") {
			t.Fatalf("%d attempts, err %v; want 1, naming WAITAOF", n, err)
		}
	})
	t.Run("ACL without INFO", func(t *testing.T) {
		urls := make([]string, len(nodes))
		for i, n := range nodes {
			admin := n.Client()
			err := admin.Do(ctx, "acl", "setuser", "noinfo", "on", ">pw", "allkeys", "+@all", "-info").Err()
			admin.Close()
			if err != nil {
				t.Fatal(err)
			}
			urls[i] = "redis://noinfo:pw@" + n.Addr
		}
		c, err := harness.NewClient(t, urls, redlock.WithNodeTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if n, err := attempts(t, c, "incurable:info"); n != 1 || !strings.Contains(err.Error(), "NOPERM") {
			t.Fatalf("%d attempts, err %v; want 1, naming NOPERM", n, err)
		}
	})
	t.Run("a minority refuses", func(t *testing.T) {
		admin := nodes[0].Client()
		defer admin.Close()
		if err := admin.Do(ctx, "acl", "setuser", "part", "on", ">pw", "allkeys", "+@all", "-info").Err(); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes[1:] {
			a := n.Client()
			err := a.Do(ctx, "acl", "setuser", "part", "on", ">pw", "allkeys", "+@all").Err()
			a.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
		urls := []string{"redis://part:pw@" + nodes[0].Addr, "redis://part:pw@" + nodes[1].Addr, "redis://part:pw@" + nodes[2].Addr}
		c, err := harness.NewClient(t, urls, redlock.WithNodeTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		l, err := c.Lock(ctx, "incurable:minority", time.Second)
		if err != nil {
			t.Fatalf("two of three nodes grant: %v", err)
		}
		_ = l.Release(ctx)
	})
}

func mustServerPath(t *testing.T) string {
	p, err := harness.ServerPath()
	if err != nil {
		t.Fatal(err)
	}
	return p
}
