package topology

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
)

// A sentinel-managed master, reached through a go-redis failover client
// (the client asks the sentinel for the master), serves as one of three
// Redlock nodes: the lock lands on that master with the owner value, is
// extended and released there.
func TestSentinelMasterAsOneNode(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{}) // the monitored master, then two standalone nodes
	s := harness.StartSentinel(t, "mymaster", nodes[0])
	fc := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            s.MasterName,
		SentinelAddrs:         []string{s.Addr},
		ContextTimeoutEnabled: true,
	})
	master, p0, p1 := nodes[0].Client(), nodes[1].Client(), nodes[2].Client()
	closeAll(t, fc, master, p0, p1)
	c := newClient(t, []redis.UniversalClient{fc, p0, p1}, redlock.WithQuorum(redlock.AllNodes))
	ctx := context.Background()

	const key = "lock:invoice-3"
	l, err := c.Lock(ctx, key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range l.Votes() { // AllNodes: every node has answered
		if !r.Vote || r.Err != nil {
			t.Errorf("node %d (%s): vote %v, err %v; want yes", i, r.Addr, r.Vote, r.Err)
		}
	}
	// Read directly on the master the sentinel names, not through the
	// failover client.
	for name, cmd := range map[string]redis.Cmdable{"master " + nodes[0].Addr: master, "standalone 0": p0, "standalone 1": p1} {
		if got := get(t, cmd, key); got != l.Owner() {
			t.Errorf("%s: %s = %q, want the owner %q", name, key, got, l.Owner())
		}
	}
	if d := pttl(t, master, key); d <= 0 || d > ttl {
		t.Errorf("master: PTTL %s = %v, want in (0, %v]", key, d, ttl)
	}
	if err := l.Extend(ctx, 2*ttl); err != nil {
		t.Fatal(err)
	}
	if d := pttl(t, master, key); d <= ttl {
		t.Errorf("master: PTTL after Extend(%v) = %v, want > %v", 2*ttl, d, ttl)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	absent(t, key, master, p0, p1)

	// The same through a failover client that logs in to the master as
	// the documented ACL user: the failover client needs no more than
	// aclLine on the master.
	setUser(t, nodes[0].Addr, aclLine)
	fa := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            s.MasterName,
		SentinelAddrs:         []string{s.Addr},
		Username:              "locker",
		Password:              "s3cret",
		ContextTimeoutEnabled: true,
	})
	closeAll(t, fa)
	ca := newClient(t, []redis.UniversalClient{fa})
	l, err = ca.Lock(ctx, key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if got := get(t, master, key); got != l.Owner() {
		t.Errorf("master as %q: %s = %q, want the owner %q", "locker", key, got, l.Owner())
	}
	if err := l.Extend(ctx, ttl); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	absent(t, key, master)
}
