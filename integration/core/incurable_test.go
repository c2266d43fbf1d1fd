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

// The user's permissions on the nodes of these tests: every key, or every
// key but the lock's (the library's own keys stay allowed, so that the
// refusal is the lock command's).
const (
	aclAllKeys  = "resetkeys allkeys +@all"
	aclNotLocks = "resetkeys ~other:* ~redlock:* ~{redlock:* +@all"
)

// setACL gives the user "locker" (password pw) the permissions acl on
// node n.
func setACL(t *testing.T, n *harness.Node, acl string) {
	t.Helper()
	admin := n.Client()
	defer admin.Close()
	args := []interface{}{"acl", "setuser", "locker", "on", ">pw"}
	for _, f := range strings.Fields(acl) {
		args = append(args, f)
	}
	if err := admin.Do(context.Background(), args...).Err(); err != nil {
		t.Fatal(err)
	}
}

// holdOn locks key for a minute on nodes, as another process that
// holds it.
func holdOn(t *testing.T, nodes []*harness.Node, key string) {
	t.Helper()
	other := client(t, nodes)
	if _, err := other.Lock(context.Background(), key, time.Minute); err != nil {
		t.Fatal(err)
	}
}

// lockRefused runs Lock on key with a 3 s ctx and checks that it ended
// at its first attempt with the nodes' refusal as its cause, not with
// ctx's deadline after retrying.
func lockRefused(t *testing.T, c *redlock.Client, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	l, err := c.Lock(ctx, key, 10*time.Second)
	if err == nil {
		_ = l.Release(ctx)
		t.Fatal("Lock won on two nodes of five")
	}
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		t.Fatalf("Lock: %v, want a QuorumError", err)
	}
	t.Logf("%d attempts in %v: %v", qe.Attempts, time.Since(start).Round(time.Millisecond), err)
	if qe.Attempts != 1 || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("%d attempts, cause %v; want 1 attempt ended by the NOPERM refusal", qe.Attempts, qe.Cause)
	}
}

// A refusal no retry changes (NOPERM) from three nodes of five, while the
// key is held on the other two, ends Lock at its first attempt, also when
// the refusals come after the other nodes' answers decided the round.
func TestIncurableMajorityAnswersLate(t *testing.T) {
	nodes := harness.Start(t, 5, harness.Config{})
	ps, _ := proxies(t, nodes, false)
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		acl := aclAllKeys
		if i >= 2 {
			acl = aclNotLocks
			ps[i].SetLatency(25 * time.Millisecond) // each way: the refusals come last
		}
		setACL(t, n, acl)
		urls[i] = "redis://locker:pw@" + ps[i].Addr
		if i < 2 {
			urls[i] = "redis://locker:pw@" + n.Addr
		}
	}
	holdOn(t, nodes[:2], "lock:late")
	c, err := harness.NewClient(t, urls, redlock.WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lockRefused(t, c, "lock:late")
}

// A user whose permissions on three nodes of five are taken away while
// the Client runs: Lock ends at its first attempt with the refusal,
// whichever answers decided the round (no node is slower than another
// here: each call's order is chance).
func TestIncurableACLChangedAtRunTime(t *testing.T) {
	nodes := harness.Start(t, 5, harness.Config{})
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		setACL(t, n, aclAllKeys)
		urls[i] = "redis://locker:pw@" + n.Addr
	}
	c, err := harness.NewClient(t, urls, redlock.WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	l, err := c.Lock(ctx, "lock:acl", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	holdOn(t, nodes[:2], "lock:acl")
	for _, n := range nodes[2:] {
		setACL(t, n, aclNotLocks)
	}
	for range 3 { // each call a new draw of which answers come first
		lockRefused(t, c, "lock:acl")
	}
}
