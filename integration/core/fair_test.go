package core

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/admin"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/observe"
)

// queued returns how many waiters each node queues for the fair lock key.
func queued(t testing.TB, nodes []*harness.Node, key string) []int64 {
	t.Helper()
	out := make([]int64, len(nodes))
	for i, n := range nodes {
		c := n.Client()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		v, err := c.ZCard(ctx, "{"+key+"}:fair:queue").Result()
		cancel()
		c.Close()
		if err != nil {
			t.Fatalf("ZCARD on %s: %v", n.Addr, err)
		}
		out[i] = v
	}
	return out
}

// queuedUntil waits until every node queues want waiters of key.
func queuedUntil(t testing.TB, nodes []*harness.Node, key string, want int64) {
	t.Helper()
	until := time.Now().Add(20 * time.Second)
	for {
		q := queued(t, nodes, key)
		all := true
		for _, v := range q {
			all = all && v == want
		}
		if all {
			return
		}
		if time.Now().After(until) {
			t.Fatalf("queues %v, want %d waiters on every node", q, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Waiters that queue one after another (each starts once the previous one
// is queued on every node) get the lock in that order, each from its own
// Client.
func TestFairOrder(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h, err := client(t, nodes).Lock(ctx, "fair", 30*time.Second, redlock.Fair())
	if err != nil {
		t.Fatal(err)
	}
	if h.Kind() != observe.KindFair {
		t.Fatalf("Kind = %q", h.Kind())
	}
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		c := client(t, nodes)
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Lock(ctx, "fair", 30*time.Second, redlock.Fair())
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			if err := l.Release(ctx); err != nil {
				t.Errorf("waiter %d release: %v", i, err)
			}
		}()
		queuedUntil(t, nodes, "fair", int64(i+1))
	}
	if _, err := client(t, nodes).TryLock(ctx, "fair", time.Second, redlock.Fair()); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("a TryLock went past the queue: %v", err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, v := range order {
		if v != i {
			t.Fatalf("grant order %v, want request order", order)
		}
	}
	queuedUntil(t, nodes, "fair", 0)
}

// A waiter whose process died keeps nobody waiting past
// FairWaiterTimeout: its place runs out.
func TestFairDeadWaiterExpires(t *testing.T) {
	c, nodes := setup(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, n := range nodes {
		cl := n.Client()
		now, err := cl.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		cl.Set(ctx, "{dead}:fair:ticket", 1, time.Minute) // as its attempts left it
		cl.ZAdd(ctx, "{dead}:fair:queue", redisZ(1, "dead-waiter"))
		cl.ZAdd(ctx, "{dead}:fair:places", redisZ(float64(now.Add(admin.FairWaiterTimeout).UnixMilli()), "dead-waiter"))
		cl.Close()
	}
	if _, err := c.TryLock(ctx, "dead", time.Second, redlock.Fair()); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("TryLock went past a queued waiter: %v", err)
	}
	start := time.Now()
	l, err := c.Lock(ctx, "dead", 10*time.Second, redlock.Fair())
	if err != nil {
		t.Fatalf("behind a dead waiter: %v", err)
	}
	t.Logf("got the lock after %v", time.Since(start))
	_ = l.Release(ctx)
}

// A waiter that gives up leaves every node's queue.
func TestFairGiveUpLeavesQueue(t *testing.T) {
	c, nodes := setup(t, 3)
	ctx := context.Background()
	h, err := c.Lock(ctx, "gu", 30*time.Second, redlock.Fair())
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := client(t, nodes).Lock(wctx, "gu", time.Second, redlock.Fair())
		done <- err
	}()
	queuedUntil(t, nodes, "gu", 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	queuedUntil(t, nodes, "gu", 0)
	_ = h.Release(ctx)
}

// Many waiters of each Client: all get through, one at a time (this
// Client's first waiter keeps the places of those behind it).
func TestFairManyWaitersPerClient(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	clients := []*redlock.Client{client(t, nodes), client(t, nodes)}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var holders, most, total atomic.Int32
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(c *redlock.Client) {
			defer wg.Done()
			for j := 0; j < 5; j++ {
				l, err := c.Lock(ctx, "many", 10*time.Second, redlock.Fair())
				if err != nil {
					t.Errorf("Lock: %v", err)
					return
				}
				if h := holders.Add(1); h > most.Load() {
					most.Store(h)
				}
				time.Sleep(time.Millisecond)
				holders.Add(-1)
				total.Add(1)
				if err := l.Release(ctx); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		}(clients[g%2])
	}
	wg.Wait()
	if most.Load() != 1 || total.Load() != 40 {
		t.Fatalf("%d holders at once, %d of 40 acquisitions", most.Load(), total.Load())
	}
	queuedUntil(t, nodes, "many", 0)
}

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }
