package topology

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
)

// With aclHandoffLine, a waiter of another Client is woken by the release
// itself (its backoff is a minute), and no subscription is refused.
func TestACLUserWithNotifications(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	for _, n := range nodes {
		setUser(t, n.Addr, aclHandoffLine)
	}
	a, err := redlock.NewFromURLs(lockerURLs(nodes))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	b, err := redlock.NewFromURLs(lockerURLs(nodes), redlock.WithRetryBackoff(time.Minute, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	ctx := context.Background()
	la, err := a.Lock(ctx, "lock:n", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		lb, err := b.Lock(wctx, "lock:n", time.Minute)
		if err == nil {
			err = lb.Release(ctx)
		}
		got <- err
	}()
	harness.WaitSubscribers(t, nodes, "redlock:released:lock:n")
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v (%+v)", err, b.Stats().Handoff)
	}
	if s := b.Stats().Handoff; s.Notified != 1 || s.SubscribeErrors != 0 {
		t.Fatalf("handoff stats %+v: want one notification, no refused subscription", s)
	}
}

// With the minimal aclLine of docs/deployment.md (no pub/sub permission), the nodes
// refuse every SUBSCRIBE: the waiters of one Client on one key still take
// their turns through the local hand-off and their backoff, none waits for
// a notification that cannot come, and the refused subscription is not
// sent again and again.
func TestACLMinimalLineWaitersDoNotStall(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	for _, n := range nodes {
		setUser(t, n.Addr, aclLine)
	}
	c, err := redlock.NewFromURLs(lockerURLs(nodes))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	const workers, calls = 8, 20
	var wg sync.WaitGroup
	var failed, slow atomic.Int64
	errs := make(chan error, workers*calls)
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < calls; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				begin := time.Now()
				l, err := c.Lock(ctx, "lock:minimal", time.Minute)
				if time.Since(begin) > 2500*time.Millisecond {
					slow.Add(1) // half its deadline: it waited for something that did not come
				}
				if err != nil {
					failed.Add(1)
					errs <- err
					cancel()
					continue
				}
				time.Sleep(time.Duration(2+i%4) * time.Millisecond)
				if err := l.Release(context.Background()); err != nil {
					errs <- err
				}
				cancel()
			}
		}()
	}
	wg.Wait()
	close(errs)
	s := c.Stats().Handoff
	t.Logf("%d calls in %v, %d failed, %d slow; handoff %+v", workers*calls, time.Since(start), failed.Load(), slow.Load(), s)
	for err := range errs {
		t.Error(err)
		break
	}
	if failed.Load() != 0 || slow.Load() != 0 || s.Stalls != 0 {
		t.Fatalf("%d of %d Lock calls failed, %d took over half their deadline, %d stalls; handoff %+v",
			failed.Load(), workers*calls, slow.Load(), s.Stalls, s)
	}
	// One refused SUBSCRIBE per node opens a hold-off of a second or more;
	// a few replies to commands already sent may follow it.
	if bound := uint64(len(nodes) * (2 + 2*int(time.Since(start)/time.Second))); s.SubscribeErrors > bound {
		t.Fatalf("%d refused subscriptions, want at most %d; handoff %+v", s.SubscribeErrors, bound, s)
	}
}
