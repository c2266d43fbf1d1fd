package topology

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
)

// aclHandoffLine is aclLine plus what the release notifications need (see
// package handoff): the releasing user PUBLISHes on the key's channel, the
// waiting Client SUBSCRIBEs to it (PING keeps the connection checked).
const aclHandoffLine = aclLine + " &redlock:released:lock:* +publish +subscribe +unsubscribe +ping"

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
	waitSubscribed(t, nodes, "lock:n")
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v (%+v)", err, b.HandoffStats())
	}
	if s := b.HandoffStats(); s.Notified != 1 || s.SubscribeErrors != 0 {
		t.Fatalf("handoff stats %+v: want one notification, no refused subscription", s)
	}
}

// waitSubscribed waits until key's release channel has a subscriber on
// every node.
func waitSubscribed(t *testing.T, nodes []*harness.Node, key string) {
	t.Helper()
	guard := time.Now().Add(time.Minute)
	for _, n := range nodes {
		cl := n.Client()
		for {
			ch := "redlock:released:" + key
			got, err := cl.PubSubNumSub(context.Background(), ch).Result()
			if err == nil && got[ch] > 0 {
				break
			}
			if time.Now().After(guard) {
				t.Fatalf("no subscription to %s on %s", ch, n.Addr)
			}
			time.Sleep(5 * time.Millisecond)
		}
		cl.Close()
	}
}
