package core

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/internal/handoff"
	"github.com/redlock-go/redlock/observe"
)

// A waiter in another process (here another Client) is woken by the
// release itself: its backoff is a minute, so only the nodes' notification
// can wake it before its ctx (20 s) ends.
func TestWaiterWokenByRelease(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	a := client(t, nodes)
	b := client(t, nodes, redlock.WithRetryBackoff(time.Minute, time.Minute))
	ctx := context.Background()
	la, err := a.Lock(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		lb, err := b.Lock(wctx, "k", time.Minute)
		if err == nil {
			err = lb.Release(ctx)
		}
		got <- err
	}()
	harness.WaitSubscribers(t, nodes, handoff.Channel("k"))
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v (handoff stats %+v)", err, b.Stats().Handoff)
	}
	if s := b.Stats().Handoff; s.Notified != 1 || s.Timer != 0 || s.Messages < 1 {
		t.Fatalf("the waiter was not woken by the notification: %+v", s)
	}
}

// Inside one Client, a Release hands the lock straight to the next waiting
// Lock call: same owner value on the nodes, no round trip; the events say
// so. The last holder's Release, with nobody waiting, deletes it.
func TestLockPassedToLocalWaiter(t *testing.T) {
	ev := newEvents()
	// A backoff of a minute: the waiter does not poll the nodes meanwhile.
	var calls atomic.Int64 // node calls that have returned
	c, nodes := setup(t, 3, redlock.WithObserver(ev.observe), redlock.WithRetryBackoff(time.Minute, time.Minute),
		redlock.WithNodeObserver(func(observe.NodeEvent) { calls.Add(1) }))
	ctx := context.Background()
	first, err := c.Lock(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *redlock.Lock, 1)
	go func() {
		l, err := c.Lock(ctx, "k", time.Minute)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitQueued(t, c) // the second call tried once, found the key held and queued
	// Both acquisitions' calls have returned (each returns at its round's
	// decision): 3 for the first, 3 for the second's refused attempt.
	guard := time.Now().Add(time.Minute)
	for calls.Load() < 6 {
		if time.Now().After(guard) {
			t.Fatalf("%d node calls returned, want 6", calls.Load())
		}
		time.Sleep(time.Millisecond)
	}
	before := totalScripts(t, nodes) + totalCmd(t, nodes, "set")
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	second := <-got
	if second == nil {
		t.FailNow()
	}
	if after := totalScripts(t, nodes) + totalCmd(t, nodes, "set"); after != before {
		t.Fatalf("%d commands reached the nodes for a local pass", after-before)
	}
	if second.Owner() != first.Owner() || second == first || first.Err() != redlock.ErrReleased || second.Err() != nil {
		t.Fatalf("passed lock: owner %q (was %q), first.Err %v, second.Err %v", second.Owner(), first.Owner(), first.Err(), second.Err())
	}
	if vals, _ := raw(t, nodes, "k"); count(vals, second.Owner()) < c.Quorum() || count(vals, second.Owner())+count(vals, "") != 3 {
		t.Fatalf("nodes hold %q, want the passed owner on a quorum", vals)
	}
	// Both sides report the pass (in either order: the waiter may take the
	// lock before Release returns).
	passed := ev.waitFor(t, 2, func(e observe.Event) bool { return e.Passed })
	ops := map[string]*redlock.Lock{}
	for _, e := range passed {
		ops[string(e.Op)], _ = e.Lock.(*redlock.Lock)
	}
	if len(passed) != 2 || ops["release"] != first || ops["acquire"] != second {
		t.Fatalf("pass events: %+v", passed)
	}
	if s := c.Stats().Handoff; s.Handed != 1 {
		t.Fatalf("Handed = %d", s.Handed)
	}
	if err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if vals, _ := raw(t, nodes, "k"); count(vals, "") != 3 {
		t.Fatalf("key left: %q", vals)
	}
}

// waitQueued waits until c has a local waiter (a Lock call that queued
// after a failed attempt).
func waitQueued(t *testing.T, c *redlock.Client) {
	t.Helper()
	guard := time.Now().Add(time.Minute)
	for c.Stats().Handoff.Waiting == 0 {
		if time.Now().After(guard) {
			t.Fatal("no waiter queued")
		}
		time.Sleep(time.Millisecond)
	}
}

// WithLocalHandoff bounds the passes in a row; then the lock is released
// on the nodes so that other processes get their turn.
func TestLocalPassesAreBounded(t *testing.T) {
	ev := newEvents()
	c, _ := setup(t, 3, redlock.WithLocalHandoff(2, 0), redlock.WithObserver(ev.observe))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	holds := 0
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				done := holds >= 40
				mu.Unlock()
				if done {
					return
				}
				l, err := c.Lock(ctx, "k", time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				time.Sleep(time.Millisecond)
				mu.Lock()
				holds++
				mu.Unlock()
				if err := l.Release(ctx); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	run, most, passes := 0, 0, 0
	for _, e := range ev.waitFor(t, 40, func(e observe.Event) bool { return e.Op == "acquire" && e.Err == nil }) {
		if e.Passed {
			run++
			passes++
		} else {
			run = 0
		}
		most = max(most, run)
	}
	if most > 2 || passes == 0 {
		t.Fatalf("%d passes, at most %d in a row; want some, at most 2 in a row", passes, most)
	}
}

// A waiter whose subscription is refused (its user lacks the channel
// permission) still acquires: its backoff timer ends each wait.
func TestWaiterPollsWithoutSubscription(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		cl := n.Client()
		err := cl.Do(context.Background(), "ACL", "SETUSER", "nosub", "on", ">pw", "~*", "resetchannels", "+@all").Err()
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		urls[i] = "redis://nosub:pw@" + n.Addr
	}
	b, err := harness.NewClient(t, urls)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	a := client(t, nodes)
	ctx := context.Background()
	la, err := a.Lock(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		lb, err := b.Lock(ctx, "k", time.Minute)
		if err == nil {
			err = lb.Release(ctx)
		}
		got <- err
	}()
	guard := time.Now().Add(time.Minute)
	for b.Stats().Handoff.SubscribeErrors < 3 { // refused on every node
		if time.Now().After(guard) {
			t.Fatalf("subscriptions not refused: %+v", b.Stats().Handoff)
		}
		time.Sleep(time.Millisecond)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if s := b.Stats().Handoff; s.Notified != 0 || s.Timer == 0 {
		t.Fatalf("want waits ended by the timer only: %+v", s)
	}
}

// totalCmd sums the calls of one command (INFO commandstats) on the nodes.
func totalCmd(t *testing.T, nodes []*harness.Node, cmd string) int {
	t.Helper()
	total := 0
	for _, n := range nodes {
		cl := n.Client()
		stats, err := cl.Info(context.Background(), "commandstats").Result()
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(stats, "\n") {
			if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
				var k int
				for _, ch := range rest {
					if ch < '0' || ch > '9' {
						break
					}
					k = k*10 + int(ch-'0')
				}
				total += k
			}
		}
	}
	return total
}
