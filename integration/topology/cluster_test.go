package topology

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/observe"
)

// A 3-master Redis Cluster serves as one of three Redlock nodes (next to
// two standalone servers): single-key and {hash tag} multi-key locks land
// on the master that serves their slot with the owner value, extend and
// release there, and a foreign holder on the cluster counts as its no.
func TestClusterAsOneNode(t *testing.T) {
	cl := harness.StartCluster(t, 3)
	plain := harness.Start(t, 2, harness.Config{})
	cc := cl.Client()
	p0, p1 := plain[0].Client(), plain[1].Client()
	masters := make([]*redis.Client, len(cl.Masters))
	for i, m := range cl.Masters {
		masters[i] = m.Client()
	}
	closeAll(t, cc, p0, p1, masters[0], masters[1], masters[2])
	// AllNodes: a call returns only once every node has answered, so
	// what it did is in place on all three when it returns.
	c := newClient(t, []redis.UniversalClient{cc, p0, p1}, redlock.WithQuorum(redlock.AllNodes))
	ctx := context.Background()

	// held checks that every key holds owner on the cluster (read through
	// the cluster client, and directly on the master that serves its
	// slot) and on both standalone nodes.
	held := func(t *testing.T, keys []string, owner string) {
		t.Helper()
		for _, k := range keys {
			slot, err := cc.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := get(t, cc, k); got != owner {
				t.Errorf("cluster: %s = %q, want the owner %q", k, got, owner)
			}
			for i, s := range cl.Masters { // the master that serves the slot, read directly
				if s == cl.MasterOf(int(slot)) {
					if got := get(t, masters[i], k); got != owner {
						t.Errorf("master %s (slot %d): %s = %q, want the owner %q", s.Addr, slot, k, got, owner)
					}
				}
			}
			if d := pttl(t, cc, k); d <= 0 || d > ttl {
				t.Errorf("cluster: PTTL %s = %v, want in (0, %v]", k, d, ttl)
			}
			for i, p := range []*redis.Client{p0, p1} {
				if got := get(t, p, k); got != owner {
					t.Errorf("standalone %d: %s = %q, want the owner %q", i, k, got, owner)
				}
			}
		}
	}
	// dbsize counts the keys on all masters: the lock's keys are there
	// once, on the masters of their slots, and nowhere else.
	dbsize := func(t *testing.T) int64 {
		t.Helper()
		var n int64
		for i := range masters {
			k, err := masters[i].DBSize(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			n += k
		}
		return n
	}

	t.Run("single key", func(t *testing.T) {
		const key = "lock:order-1"
		l, err := c.Lock(ctx, key, ttl)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range l.Votes() { // AllNodes: every node has answered
			if !r.Vote || r.Err != nil {
				t.Errorf("node %d (%s): vote %v, err %v; want yes", i, r.Addr, r.Vote, r.Err)
			}
		}
		held(t, []string{key}, l.Owner())
		if n := dbsize(t); n != 1 {
			t.Errorf("the cluster holds %d keys, want 1", n)
		}
		if err := l.Extend(ctx, 2*ttl); err != nil {
			t.Fatal(err)
		}
		if d := pttl(t, cc, key); d <= ttl {
			t.Errorf("cluster: PTTL after Extend(%v) = %v, want > %v", 2*ttl, d, ttl)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		absent(t, key, cc, p0, p1)
	})

	t.Run("hash tag keys", func(t *testing.T) {
		keys := []string{"lock:{order-7}:stock", "lock:{order-7}:payment", "lock:{order-7}:invoice"}
		l, err := c.LockKeys(ctx, keys, ttl)
		if err != nil {
			t.Fatal(err)
		}
		held(t, keys, l.Owner())
		if n := dbsize(t); n != int64(len(keys)) {
			t.Errorf("the cluster holds %d keys, want %d", n, len(keys))
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			absent(t, k, cc, p0, p1)
		}
		if n := dbsize(t); n != 0 {
			t.Errorf("the cluster holds %d keys after Release, want 0", n)
		}
	})

	t.Run("foreign holder on the cluster", func(t *testing.T) {
		// Someone else holds the key on the cluster and on the first
		// standalone node: only one of three can say yes.
		const key = "lock:order-9"
		for _, cmd := range []redis.Cmdable{cc, p0} {
			if err := cmd.Set(ctx, key, "someone-else", ttl).Err(); err != nil {
				t.Fatal(err)
			}
		}
		var (
			mu      sync.Mutex
			answers = map[string][]observe.NodeEvent{} // by node address
		)
		c := newClient(t, []redis.UniversalClient{cc, p0, p1}, redlock.WithNodeObserver(func(e observe.NodeEvent) {
			mu.Lock()
			answers[e.Addr] = append(answers[e.Addr], e)
			mu.Unlock()
		}))
		_, err := c.TryLock(ctx, key, ttl)
		var qe *redlock.QuorumError
		if !errors.Is(err, redlock.ErrNotObtained) || !errors.As(err, &qe) {
			t.Fatalf("TryLock over a foreign holder: %v, want a QuorumError matching ErrNotObtained", err)
		}
		// The round is decided at the second no; Close waits for the
		// calls still in flight (the free node's yes and its undo).
		_ = c.Close()
		mu.Lock()
		defer mu.Unlock()
		for i, want := range []bool{false, false, true} {
			addr := c.Addrs()[i]
			if len(answers[addr]) == 0 {
				t.Fatalf("node %d (%s) has no answer", i, addr)
			}
			if e := answers[addr][0]; e.Op != "acquire" || e.Vote != want || e.Err != nil {
				t.Errorf("node %d (%s): %s vote %v, err %v; want acquire vote %v", i, addr, e.Op, e.Vote, e.Err, want)
			}
		}
		// The foreign value is untouched, and the yes of the free node
		// was undone.
		for _, cmd := range []redis.Cmdable{cc, p0} {
			if got := get(t, cmd, key); got != "someone-else" {
				t.Errorf("%s = %q, want the foreign value", key, got)
			}
		}
		absent(t, key, p1)
	})

	t.Run("keys in different slots", func(t *testing.T) {
		// The library's slot function agrees with the cluster's.
		keys := []string{"lock:a", "lock:b", "lock:{a}:x", "lock:{a}:y", "{}x", "lock:{}{a}", "plain"}
		for _, k := range keys {
			s, err := cc.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := node.Slot(k); got != int(s) {
				t.Errorf("node.Slot(%q) = %d, CLUSTER KEYSLOT says %d", k, got, s)
			}
		}
		var calls atomic.Int64
		c := newClient(t, []redis.UniversalClient{cc, p0, p1},
			redlock.WithNodeObserver(func(observe.NodeEvent) { calls.Add(1) }))
		split := []string{"lock:a", "lock:b"}
		if node.Slot(split[0]) == node.Slot(split[1]) {
			t.Fatalf("test keys %q share a slot", split)
		}
		for name, try := range map[string]func() error{
			"LockKeys":    func() error { _, err := c.LockKeys(ctx, split, ttl); return err },
			"TryLockKeys": func() error { _, err := c.TryLockKeys(ctx, split, ttl); return err },
		} {
			if err := try(); !errors.Is(err, redlock.ErrInvalidArgument) {
				t.Errorf("%s over two slots: %v, want ErrInvalidArgument", name, err)
			}
		}
		if n := calls.Load(); n != 0 {
			t.Errorf("%d node calls were made, want none", n)
		}
		for _, k := range split {
			absent(t, k, cc, p0, p1)
		}
	})

	t.Run("ACL user", func(t *testing.T) {
		// A cluster client discovers the slots with CLUSTER SLOTS: on
		// a cluster the documented ACL user needs that one more command.
		for _, m := range cl.Masters {
			setUser(t, m.Addr, aclLine)
		}
		without := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), Username: "locker", Password: "s3cret",
			ContextTimeoutEnabled: true})
		closeAll(t, without)
		_, err := newClient(t, []redis.UniversalClient{without}).TryLock(ctx, "lock:acl-8", ttl)
		var qe *redlock.QuorumError
		if !errors.As(err, &qe) || !strings.Contains(fmt.Sprint(qe.Nodes[0].Err), "NOPERM this user has no permissions to run the 'cluster|slots' command") {
			t.Fatalf("cluster client as a user without +cluster|slots: %v, want NOPERM for cluster|slots", err)
		}
		for _, m := range cl.Masters {
			setUser(t, m.Addr, aclLine+" +cluster|slots")
		}
		ca := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), Username: "locker", Password: "s3cret",
			ContextTimeoutEnabled: true})
		closeAll(t, ca)
		c := newClient(t, []redis.UniversalClient{ca})
		for _, keys := range [][]string{{"lock:acl-9"}, {"lock:{acl}:a", "lock:{acl}:b"}} {
			l, err := c.LockKeys(ctx, keys, ttl)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if got := get(t, cc, k); got != l.Owner() {
					t.Errorf("cluster as %q: %s = %q, want the owner %q", "locker", k, got, l.Owner())
				}
			}
			if err := l.Extend(ctx, ttl); err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				absent(t, k, cc)
			}
		}
	})
}
