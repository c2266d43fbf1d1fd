package topology

import (
	"context"
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
