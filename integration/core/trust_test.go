package core

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/observe"
)

// Node trust against real servers: a node that may have lost a held lock's
// key does not vote for anyone else while that lock may still be held,
// also where two ordinary events follow each other or keys are lost
// without a restart. Each test holds a 20 s lock with one Client and asks
// another Client (which knew every node before the fault) for the same key
// right after the fault: a second holder is the violation.

// secondHolder fails the test if b gets key, in tries over a second and a
// half (the first may meet connections the fault broke), while another
// Client's 20 s lock on it is held.
func secondHolder(t *testing.T, b *redlock.Client, key string, what string) {
	t.Helper()
	ctx := context.Background()
	var err error
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		var l *redlock.Lock
		if l, err = b.TryLock(ctx, key, 20*time.Second); err == nil {
			left := l.Remaining()
			_ = l.Release(ctx)
			t.Fatalf("%s: a second holder got %q with the first lock's 20 s still held (%v of its own left)", what, key, left)
		}
		if !errors.Is(err, redlock.ErrNotObtained) {
			t.Fatalf("%s: %v, want ErrNotObtained", what, err)
		}
	}
	t.Logf("%s: refused as it must be: %v", what, err)
}

// replace kills node n, deletes its data and starts an empty server with
// the same config at its address: a pod rescheduled with an emptyDir, a
// container recreated without its volume.
func replace(t *testing.T, n *harness.Node) {
	t.Helper()
	n.Kill()
	if err := n.Wipe(); err != nil {
		t.Fatal(err)
	}
	if err := n.Up(); err != nil {
		t.Fatal(err)
	}
}

// A node replaced at its address by an empty server with appendfsync
// always is a node that lost its keys: appendfsync always in the config
// proves nothing when the disk is new. 3 of 5 replaced would let a second
// holder in at once; 1 of 3 must be kept out of the quorum all the same.
// A real restart that kept its append-only file loses nothing and is not
// kept out.
func TestReplacedByEmptyAlwaysFsyncServer(t *testing.T) {
	for _, tc := range []struct{ n, replaced int }{{5, 3}, {3, 1}} {
		t.Run(strconv.Itoa(tc.replaced)+"of"+strconv.Itoa(tc.n), func(t *testing.T) {
			nodes := harness.Start(t, tc.n, harness.Config{Persist: true})
			a, b := client(t, nodes), client(t, nodes)
			warm(t, b)
			ctx := context.Background()
			held, err := a.TryLock(ctx, "trust:replaced", 20*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer held.Release(ctx)
			for i := 0; i < tc.replaced; i++ {
				replace(t, nodes[i])
			}
			secondHolder(t, b, "trust:replaced", "replaced by empty always-fsync servers")
			// Every replaced node is found out (by its guard's refusal, read
			// again in the background) and kept out.
			var s observe.QuarantineStats
			for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
				if s = b.Stats().Quarantine; s.Now >= tc.replaced {
					return
				}
				_, _ = b.TryLock(ctx, "trust:replaced", 20*time.Second)
			}
			t.Fatalf("%d nodes quarantined after %d were replaced: %+v", s.Now, tc.replaced, s)
		})
	}
	t.Run("restart keeps its file", func(t *testing.T) {
		nodes := harness.Start(t, 1, harness.Config{Persist: true}) // one node: every round waits for its vote
		b := client(t, nodes)
		warm(t, b)
		if err := nodes[0].Restart(); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var err error
		for try := 0; try < 20; try++ { // the restart broke the connection: a try may fail
			var l *redlock.Lock
			if l, err = b.TryLock(ctx, "trust:kept", 5*time.Second); err == nil {
				_ = l.Release(ctx)
				if s := b.Stats().Quarantine; s.Started != 0 {
					t.Fatalf("a restart that loaded its own always-fsynced file was quarantined: %+v", s)
				}
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("no lock after the restart: %v", err)
	})
}

// startReplica starts a node replicating from primary and waits until it
// holds primary's data.
func startReplica(t *testing.T, cfg harness.Config, primary *harness.Node) *harness.Node {
	t.Helper()
	r := harness.Start(t, 1, cfg)[0]
	rc := r.Client()
	defer rc.Close()
	ctx := context.Background()
	host, port, _ := strings.Cut(primary.Addr, ":")
	if err := rc.Do(ctx, "replicaof", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(rc.Info(ctx, "replication").Val(), "master_link_status:up") {
		if time.Now().After(deadline) {
			t.Fatal("replica did not sync")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return r
}

// A fail-over to replicas that stopped replicating before the lock was
// taken, then a restart of the promoted nodes (which load their own
// append-only files, carrying the old primaries' stamps by replication):
// neither the promotion's window nor the restart lets a second holder in,
// whether the asking Client saw the promotion first or not.
func TestFailoverThenRestart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		durable bool
		seen    bool
	}{
		{"plain/promotion seen", false, true},
		{"plain/restarted before the next call", false, false},
		{"durable/promotion seen", true, true},
		{"durable/restarted before the next call", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := harness.Config{Persist: true}
			var opts []redlock.Option
			if tc.durable {
				cfg = harness.DurableConfig(t)
				opts = append(opts, redlock.WithDurableVotes())
			}
			failoverThenRestart(t, cfg, opts, tc.seen)
		})
	}
}

func failoverThenRestart(t *testing.T, cfg harness.Config, opts []redlock.Option, seen bool) {
	prim := harness.Start(t, 3, cfg)
	reps := []*harness.Node{startReplica(t, cfg, prim[0]), startReplica(t, cfg, prim[1])}
	up := make([]string, 3) // where each proxy leads
	urls := make([]string, 3)
	ps := make([]*harness.Proxy, 3)
	for i := range prim {
		i := i
		up[i] = prim[i].Addr
		p, err := harness.NewKeepingProxy(func() string { return up[i] })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		ps[i], urls[i] = p, p.URL()
	}
	newClient := func() *redlock.Client {
		c, err := harness.NewClient(t, urls, append([]redlock.Option{redlock.WithNodeTimeout(time.Second)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	a, b := newClient(), newClient()
	warm(t, a)
	warm(t, b) // b knows the primaries, their stamps now on the replicas too
	ctx := context.Background()
	for _, r := range reps { // replication stops before the lock
		rc := r.Client()
		err := rc.Do(ctx, "replicaof", "no", "one").Err()
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	held, err := a.TryLock(ctx, "trust:failover", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	for i, r := range reps { // fail-over: the addresses lead to the replicas
		up[i] = r.Addr
		ps[i].ResetConns()
	}
	if seen {
		secondHolder(t, b, "trust:failover", "promoted lagging replicas")
	}
	for _, r := range reps {
		if err := r.Restart(); err != nil {
			t.Fatal(err)
		}
		ps[0].ResetConns()
		ps[1].ResetConns()
	}
	secondHolder(t, b, "trust:failover", "promoted replicas restarted with their own files")
}

// fillUntilEvicted writes another application's keys (with a TTL of an
// hour, 8 KiB each) to n until key is gone, and returns the node's
// evicted_keys. It fails the test if key outlives the budget of writes.
func fillUntilEvicted(t *testing.T, n *harness.Node, key string) int64 {
	t.Helper()
	rc := n.Client()
	defer rc.Close()
	ctx := context.Background()
	val := strings.Repeat("x", 8<<10)
	for i := 0; i < 20000; i++ {
		p := rc.Pipeline()
		for j := 0; j < 50; j++ {
			p.Set(ctx, "app:"+strconv.Itoa(i*50+j), val, time.Hour)
		}
		_, _ = p.Exec(ctx) // OOM replies are expected once nothing more can go
		if rc.Exists(ctx, key).Val() == 0 {
			s := rc.Info(ctx, "stats").Val()
			_, rest, _ := strings.Cut(s, "evicted_keys:")
			ev, _ := strconv.ParseInt(strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0]), 10, 64)
			return ev
		}
	}
	t.Fatalf("%s: %q not evicted after 1,000,000 writes", n.Addr, key)
	return 0
}

// Eviction under every policy that can evict a key with a TTL: lock keys
// always carry one, so volatile-* evicts exactly them. Three of five nodes
// evict a held 20 s lock's key; no second holder, the evicting nodes do not
// vote.
func TestEvictedLockKey(t *testing.T) {
	for _, policy := range []string{"allkeys-lru", "volatile-lru", "volatile-ttl", "allkeys-random", "volatile-random", "allkeys-lfu", "volatile-lfu"} {
		t.Run(policy, func(t *testing.T) {
			tight := harness.Config{Args: []string{"--maxmemory", "6mb", "--maxmemory-policy", policy}}
			nodes := append(harness.Start(t, 3, tight), harness.Start(t, 2, harness.Config{})...)
			a, b := client(t, nodes), client(t, nodes)
			warm(t, b)
			ctx := context.Background()
			held, err := a.TryLock(ctx, "trust:evicted", 20*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer held.Release(ctx)
			for i := 0; i < 3; i++ {
				if ev := fillUntilEvicted(t, nodes[i], "trust:evicted"); ev == 0 {
					t.Fatalf("node %d: lock key gone with evicted_keys 0", i)
				}
			}
			secondHolder(t, b, "trust:evicted", "lock key evicted on 3 of 5 ("+policy+")")
			c := client(t, nodes) // a Client that meets the nodes only now
			secondHolder(t, c, "trust:evicted", "a new Client after the eviction ("+policy+")")
		})
	}
}

// A register entry counts where it is now, not where it was once written:
// after the registers vanish (FLUSHALL on every node, itself outside the
// model, as eviction of the register is inside it), the next grant writes
// its entry again, so a later minority restart is kept out for the held
// lock's TTL. The lock is held on 0, 1, 2; 3 and 4 are free; 0 restarts
// empty: counted at once, it would make 0, 3, 4 a quorum for another.
func TestRegisterFlushedThenMinorityRestart(t *testing.T) {
	nodes := harness.Start(t, 5, harness.Config{})
	a, b := client(t, nodes), client(t, nodes)
	ctx := context.Background()
	for _, c := range []*redlock.Client{a, b} {
		l, err := c.TryLock(ctx, "trust:warm", 20*time.Second) // entries for 20 s locks on every node
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Release(ctx)
	}
	for _, n := range nodes {
		rc := n.Client()
		err := rc.FlushAll(ctx).Err()
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes[3:] { // the lock lands on 0, 1, 2 only
		set(t, n, "trust:flushed", "someone-else", 300*time.Millisecond)
	}
	held, err := a.TryLock(ctx, "trust:flushed", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	time.Sleep(400 * time.Millisecond)         // 3 and 4 free again
	if err := nodes[0].Restart(); err != nil { // empty: no persistence
		t.Fatal(err)
	}
	secondHolder(t, b, "trust:flushed", "registers flushed, then a minority restart")
	for i := 1; i < 3; i++ {
		rc := nodes[i].Client()
		m, err := rc.HGetAll(ctx, "redlock:ttl").Result()
		rc.Close()
		if err != nil && err != redis.Nil || len(m) == 0 {
			t.Fatalf("node %d: register %v (%v) after a grant that followed the flush, want its entry", i, m, err)
		}
	}
}

// What decides whether a node may vote is not read within a lock's node
// deadline: a new Client's first TryLocks with a 10 ms TTL (a 1 ms node
// deadline) never miss the quorum because identities were not read in
// time, however loaded the machine (identities get a budget of their own;
// a node deadline missed by the grant itself is the lock's own limit, and
// the very first round does not wait for a slow node's identity).
func TestFirstContactShortTTL(t *testing.T) {
	nodes := harness.Start(t, 5, harness.Config{})
	c := client(t, nodes)
	ctx := context.Background()
	got, identity := 0, 0
	var last error
	for i := 0; i < 200; i++ {
		l, err := c.TryLock(ctx, "trust:short:"+strconv.Itoa(i), 10*time.Millisecond)
		var qe *redlock.QuorumError
		if errors.As(err, &qe) {
			unread := 0 // nodes not asked for want of their identity
			for _, r := range qe.Nodes {
				if r.Err != nil && strings.Contains(r.Err.Error(), "identity") {
					unread++
				}
			}
			if unread > 0 && qe.Got+unread >= qe.Need {
				identity++
				last = err
			}
		}
		if err != nil {
			continue
		}
		got++
		_ = l.Release(ctx)
	}
	t.Logf("%d of 200 TryLocks with a 10 ms TTL got the lock", got)
	if identity > 0 {
		t.Fatalf("%d of 200 missed the quorum for want of identity reads; the last: %v", identity, last)
	}
}
