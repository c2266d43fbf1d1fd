package core

import (
	"context"
	"errors"
	"net"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/observe"
)

// A node that cannot confirm a vote on its disk (no WAITAOF before Redis
// 7.2, or appendonly off) does not count, with the reason in the node's
// error; what the command wrote there is undone. Nothing is granted on
// votes that are not durable.
func TestDurableVotesRefusedWhereNodesCannot(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{}) // the default server, appendonly no
	c := client(t, nodes, redlock.WithDurableVotes(), redlock.WithMaxAttempts(1))
	ctx := context.Background()
	_, err := c.TryLock(ctx, "durable:refused", time.Minute)
	var qe *redlock.QuorumError
	if !errors.Is(err, redlock.ErrNotObtained) || !errors.As(err, &qe) {
		t.Fatalf("TryLock with durable votes on nodes without them: %v, want ErrNotObtained with a QuorumError", err)
	}
	refused := 0
	for _, r := range qe.Nodes {
		switch {
		case errors.Is(r.Err, observe.ErrNotDurable) && strings.Contains(r.Err.Error(), "WAITAOF refused"):
			refused++
		case !errors.Is(r.Err, observe.ErrPending): // a round ends when the quorum is out of reach
			t.Errorf("node %s: %v, want ErrNotDurable naming WAITAOF", r.Addr, r.Err)
		}
	}
	if refused < 2 {
		t.Errorf("%d nodes refused as not durable, want at least 2 (what put the quorum out of reach)", refused)
	}
	t.Logf("the error: %v", err)
	_ = c.Close() // waits for the undo
	if vals, _ := raw(t, nodes, "durable:refused"); vals[0]+vals[1]+vals[2] != "" {
		t.Fatalf("keys left behind after a refused durable vote: %q", vals)
	}
}

// A node that does not fsync within WAITAOF's timeout (appendfsync no:
// never for WAITAOF) says so before the node's deadline: the vote fails as
// "not fsynced within", not as a server without WAITAOF, and the
// connection stays in the pool (a reply that missed the deadline would
// cost a new dial per call).
// fsyncedWithin matches the not-fsynced error of a WAITAOF sent with
// 600-899 ms of a 1 s node deadline left to wait.
var fsyncedWithin = regexp.MustCompile(`not fsynced within [6-8][0-9]{2}(\.[0-9]+)?ms`)

func TestDurableNotFsyncedKeepsConnection(t *testing.T) {
	cfg := harness.Config{Persist: true, Fsync: "no", Bin: harness.DurableServer(t), Args: []string{"--hz", "100"}}
	nodes := harness.Start(t, 3, cfg)
	var dials atomic.Int64
	clients := make([]redis.UniversalClient, len(nodes))
	for i, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr, ContextTimeoutEnabled: true, MaxRetries: -1,
			Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			}})
		clients[i] = c
		t.Cleanup(func() { _ = c.Close() })
	}
	c, err := redlock.New(clients, redlock.WithDurableVotes(), redlock.WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	try := func() {
		t.Helper()
		_, err := c.TryLock(ctx, "durable:nofsync", time.Minute, redlock.WithMaxAttempts(1))
		var qe *redlock.QuorumError
		if !errors.As(err, &qe) {
			t.Fatalf("TryLock: %v, want a QuorumError", err)
		}
		for _, r := range qe.Nodes {
			if !errors.Is(r.Err, observe.ErrPending) && (!errors.Is(r.Err, observe.ErrNotDurable) || !fsyncedWithin.MatchString(r.Err.Error())) {
				t.Errorf("node %s: %v, want ErrNotDurable: not fsynced within about 800ms (a fifth of the 1 s node deadline left for the answer)", r.Addr, r.Err)
			}
		}
	}
	try() // the connections are dialed
	try()
	before := dials.Load()
	for range 5 {
		try()
	}
	if k := dials.Load() - before; k != 0 {
		t.Errorf("%d dials during 5 calls, want 0 (no connection dropped)", k)
	}
}

// On servers with WAITAOF and appendonly (harness.DurableConfig), durable
// votes grant, extend,
// renew (watchdog), fence and release like any others, for every lock type.
func TestDurableVotesEveryPath(t *testing.T) {
	nodes := harness.Start(t, 3, harness.DurableConfig(t))
	c := client(t, nodes, redlock.WithDurableVotes())
	// Lock, not TryLock, for the first grants: a fresh node's first fsync on
	// a loaded machine may outlast WAITAOF's share of the node deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := c.Lock(ctx, "durable:plain", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, 10*time.Second); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	f, err := c.Lock(ctx, "durable:fenced", 5*time.Second, redlock.WithFencing())
	if err != nil || f.Token() <= 0 {
		t.Fatalf("fenced: %v, token %v", err, f)
	}
	_ = f.Release(ctx)
	kinds := map[string]redlock.LockOption{"reentrant": redlock.Reentrant(), "read": redlock.ReadLock(),
		"write": redlock.WriteLock(), "fair": redlock.Fair(), "semaphore": redlock.Permits(2)}
	for name, opt := range kinds {
		l, err := c.TryLock(ctx, "durable:"+name, 5*time.Second, opt)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("%s Release: %v", name, err)
		}
	}
	w, err := client(t, nodes, redlock.WithDurableVotes(), redlock.WithWatchdog(time.Second, 200*time.Millisecond)).TryLock(ctx, "durable:watchdog", redlock.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	// Several renewals (every lease/3) must each be confirmed on disk.
	select {
	case <-w.Done():
		t.Fatalf("watchdog lock lost: %v", w.Err())
	case <-time.After(time.Second):
	}
	if err := w.Release(ctx); err != nil {
		t.Fatalf("watchdog Release: %v", err)
	}
}

// A user made by the lock's ACL line of docs/deployment.md, which lacks
// +waitaof, on servers that have WAITAOF with appendonly on: durable
// votes are refused by the ACL, and each node's error says so and points
// to +waitaof, not to the server's version or appendonly; the refusal ends
// Lock at its first attempt. With +waitaof added, as the page says, it
// locks.
func TestDurableVotesRefusedByACL(t *testing.T) {
	nodes := harness.Start(t, 3, harness.DurableConfig(t))
	lines, err := harness.DocACLLines("../../docs/deployment.md", "locker")
	if err != nil {
		t.Fatal(err)
	}
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		admin := n.Client()
		var args []interface{}
		for _, f := range strings.Fields(lines[0]) {
			args = append(args, f)
		}
		err := admin.Do(context.Background(), args...).Err()
		admin.Close()
		if err != nil {
			t.Fatal(err)
		}
		urls[i] = "redis://locker:s3cret@" + n.Addr
	}
	c, err := harness.NewClient(t, urls, redlock.WithNodeTimeout(time.Second), redlock.WithDurableVotes())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.Lock(ctx, "lock:durable-acl", 5*time.Second)
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) || qe.Attempts != 1 {
		t.Fatalf("Lock: %v; want a QuorumError after 1 attempt", err)
	}
	t.Logf("the error: %v", err)
	for _, r := range qe.Nodes {
		if r.Err == nil || errors.Is(r.Err, observe.ErrPending) {
			continue
		}
		if msg := r.Err.Error(); !errors.Is(r.Err, observe.ErrNotDurable) || !strings.Contains(msg, "refused by the node's ACL") ||
			!strings.Contains(msg, "+waitaof") || strings.Contains(msg, "Redis 7.2") || strings.Contains(msg, "appendonly") {
			t.Errorf("node %s: %v; want ErrNotDurable naming the ACL and +waitaof, not the version or appendonly", r.Addr, r.Err)
		}
	}
	for _, n := range nodes {
		admin := n.Client()
		err := admin.Do(ctx, "acl", "setuser", "locker", "+waitaof").Err()
		admin.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	l, err := c.Lock(ctx, "lock:durable-acl", 5*time.Second)
	if err != nil {
		t.Fatalf("with +waitaof: %v", err)
	}
	_ = l.Release(ctx)
}
