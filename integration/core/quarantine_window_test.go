package core

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/observe"
)

// countsAgain restarts node i empty and returns how long after the restart
// c's acquisitions count the node's yes again (polling with short locks of
// fresh keys), giving up after limit.
func countsAgain(t *testing.T, c *redlock.Client, nodes []*harness.Node, i int, limit time.Duration) time.Duration {
	t.Helper()
	if err := nodes[i].Restart(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ctx := context.Background()
	for try := 0; time.Since(start) < limit; try++ {
		l, err := c.TryLock(ctx, fmt.Sprintf("q:again:%d", try), 200*time.Millisecond)
		if err != nil { // the restart broke connections: one try may fail
			t.Logf("try %d: %v", try, err)
			time.Sleep(20 * time.Millisecond)
			continue
		}
		r := l.Votes()[i]
		_ = l.Release(ctx)
		if r.Vote && r.Discounted == nil {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return limit
}

// warm makes c learn every node's identity.
func warm(t *testing.T, c *redlock.Client) {
	t.Helper()
	l, err := c.TryLock(context.Background(), "q:warm", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(context.Background())
}

// TestRestartWindowFromRegister: one node of five restarts empty while
// another Client holds a 1 s lock; with the default options (setting 45 s)
// the node counts again after about the register's window (the lock's TTL
// after the restart), not 45 s. A third Client's 5 s lock, held during a
// second restart, keeps the node out for about 5 s.
func TestRestartWindowFromRegister(t *testing.T) {
	nodes := harness.Start(t, 5, harness.Config{})
	ctx := context.Background()
	a, b, long := client(t, nodes), client(t, nodes), client(t, nodes)
	warm(t, b)
	if _, err := a.TryLock(ctx, "q:short", time.Second); err != nil {
		t.Fatal(err)
	}
	if d := countsAgain(t, b, nodes, 0, 10*time.Second); d < 900*time.Millisecond || d > 4*time.Second {
		t.Fatalf("1 s locks held: node 0 counts again %v after its restart, want about 1 s (not the 45 s setting)", d)
	}
	held, err := long.TryLock(ctx, "q:long", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if d := countsAgain(t, b, nodes, 0, 15*time.Second); d < 4500*time.Millisecond || d > 9*time.Second {
		t.Fatalf("a 5 s lock held during the restart: node 0 counts again %v after its restart, want about 5 s", d)
	}
	_ = held.Release(ctx)
}

// TestRestartWindowStats: Stats and the QuarantineError say which bound
// set the window and until when: the register for one restart, the
// setting when three of five restarted (no quorum of nodes kept its
// register; the existing majority tests show no second holder).
func TestRestartWindowStats(t *testing.T) {
	nodes := harness.Start(t, 5, harness.Config{})
	ctx := context.Background()
	b := client(t, nodes, redlock.WithRestartQuarantine(8*time.Second))
	warm(t, b)
	if err := nodes[1].Restart(); err != nil {
		t.Fatal(err)
	}
	w := settledWindow(t, b, 1)
	if w.Bound != observe.BoundRegister || time.Until(w.Until) > 3*time.Second {
		t.Fatalf("one restart: window %+v, want the register's (about 1 s: b's own warm-up lock)", w)
	}
	a := client(t, nodes)
	if _, err := a.TryLock(ctx, "q:major", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes[2:] {
		if err := n.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 2; i < 5; i++ {
		w := settledWindow(t, b, i)
		if w.Bound != observe.BoundSetting || time.Until(w.Until) < 6*time.Second {
			t.Fatalf("three of five restarted: node %d's window %+v, want the 8 s setting", i, w)
		}
	}
	if _, err := b.TryLock(ctx, "q:major", time.Second); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("majority restarted: %v, want refused", err)
	}
}

// settledWindow pokes node i with acquisitions until c's quarantine
// window for it is resolved, and returns it.
func settledWindow(t *testing.T, c *redlock.Client, i int) observe.NodeWindow {
	t.Helper()
	for try := 0; try < 200; try++ {
		l, err := c.TryLock(context.Background(), fmt.Sprintf("q:poke:%d", try), 200*time.Millisecond)
		if err == nil {
			_ = l.Release(context.Background())
		}
		if w := c.Stats().Quarantine.Nodes[i]; w.Bound != "" && !w.Pending {
			return w
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("node %d's window not resolved: %+v", i, c.Stats().Quarantine.Nodes[i])
	return observe.NodeWindow{}
}

// TestRegisterEntriesDecay: the register describes the locks that may
// still be held. A 3 s lock that expired leaves an entry that expires a
// few seconds later (its TTL plus the publish slack), and a restart after
// that is not charged 3 s. A 23 h lock's entry expires with it (the key
// has a TTL), not never.
func TestRegisterEntriesDecay(t *testing.T) {
	nodes := harness.Start(t, 5, harness.Config{})
	ctx := context.Background()
	a, b := client(t, nodes), client(t, nodes)
	warm(t, b)
	if _, err := a.TryLock(ctx, "q:decay", 3*time.Second); err != nil {
		t.Fatal(err)
	}
	admin := nodes[1].Client()
	defer admin.Close()
	// TryLock returns at the quorum: node 1's grant, which raises its
	// entry, may still be on its way.
	waitUntil(t, "the 3 s entry on node 1", func() bool {
		reg, err := node.ReadRegister(ctx, admin)
		return err == nil && reg.Longest() == 3*time.Second
	})
	waitUntil(t, "the 3 s entry to expire", func() bool {
		reg, err := node.ReadRegister(ctx, admin)
		return err == nil && reg.Longest() < 3*time.Second
	})
	if d := countsAgain(t, b, nodes, 0, 10*time.Second); d > 2500*time.Millisecond {
		t.Fatalf("the 3 s lock expired, yet node 0 counts again only %v after its restart", d)
	}
	l, err := a.TryLock(ctx, "q:day", 23*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
	pttl, err := admin.PTTL(ctx, node.TTLRegisterKey).Result()
	if err != nil || pttl <= 23*time.Hour || pttl > 24*time.Hour {
		t.Fatalf("register after a 23 h lock: PTTL %v %v, want it to expire with the lock (23 h plus slack)", pttl, err)
	}
}
