package handoff

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/internal/handoff"
)

// A Watch subscribes to each of its keys' channels on every node (one
// connection per node, shared with the local queues), so that another
// Hub counts it as a waiter (Others) and a release of any of its keys,
// announced by a quorum of nodes, wakes it; Leave unsubscribes the keys
// that no local queue waits for, and keeps the others.
func TestWatchSubscribesItsKeys(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	a := newHub(t, addrs(nodes), handoff.Config{})
	b := newHub(t, addrs(nodes), handoff.Config{Quorum: 2})
	ctx := context.Background()
	ta := a.EnterWant("k", nil)
	defer ta.Leave()
	tb := b.EnterWant("k2", nil)
	w := b.Watch([]string{"k", "k2"})
	subscribed(t, addrs(nodes), 2, "k")
	subscribed(t, addrs(nodes), 1, "k2")
	for range nodes { // every node in turn
		if others, err := a.Others(ctx, "k"); err != nil || !others {
			t.Fatalf("with a Watch of k in another hub: Others = %v, %v; want true", others, err)
		}
	}
	for _, n := range nodes[:2] {
		publish(t, n.Addr, "k", "owner-1")
	}
	if woken, err := w.Wait(ctx, hang); !woken || err != nil {
		t.Fatalf("Wait after two nodes of three announced k: %v, %v; want woken", woken, err)
	}
	publish(t, nodes[2].Addr, "k", "owner-1") // the same release: no wake-up
	if woken, err := w.Wait(ctx, time.Millisecond); woken || err != nil {
		t.Fatalf("Wait after the third announced the same release: %v, %v; want its timer", woken, err)
	}
	w.Leave()
	subscribed(t, addrs(nodes), 1, "k")  // a's queue
	subscribed(t, addrs(nodes), 1, "k2") // b's queue keeps it
	tb.Leave()
	subscribed(t, addrs(nodes), 0, "k2")
	if others, err := a.Others(ctx, "k"); err != nil || others {
		t.Fatalf("after the Watch left: Others = %v, %v; want false", others, err)
	}
}
