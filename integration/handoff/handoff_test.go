package handoff

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/internal/handoff"
)

// A PUBLISH on the key's channel, on any node, from a plain client, wakes
// the head waiter: Wait says woken (only a notification can: there is no
// other waiter, no Released, and d is the hang guard), and the Hub counts
// it as a notification.
func TestPublishWakesHead(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	h := newHub(t, addrs(nodes), handoff.Config{})
	head := h.EnterWant("stock:42", nil)
	defer head.Leave()
	subscribed(t, addrs(nodes), 1, "stock:42")
	for i, n := range nodes {
		ch := waitAsync(context.Background(), head, hang)
		publish(t, n.Addr, "stock:42", fmt.Sprintf("owner-%d", i))
		if r := get(t, ch); !r.woken || r.err != nil {
			t.Fatalf("node %d: Wait = %+v; want woken by the notification", i, r)
		}
		if s := h.Stats(); s.Notified != uint64(i+1) || s.Timer != 0 {
			t.Fatalf("node %d: stats %+v; want %d notifications", i, s, i+1)
		}
	}
	if s := h.Stats(); s.Nodes != 3 || s.Messages != 3 || s.SubscribeErrors != 0 || s.ReceiveErrors != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// One release seen on every node (the same payload, the released lock's
// owner value) wakes the head once; the other messages are duplicates.
func TestOneReleaseOnEveryNodeWakesOnce(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	h := newHub(t, addrs(nodes), handoff.Config{})
	head := h.EnterWant("k", nil)
	defer head.Leave()
	subscribed(t, addrs(nodes), 1, "k")
	for _, n := range nodes {
		publish(t, n.Addr, "k", "owner-A")
	}
	until(t, "3 messages", func() bool { return h.Stats().Messages == 3 })
	if w, err := head.Wait(context.Background(), 0); !w || err != nil {
		t.Fatalf("Wait = %v, %v; want the pending notification", w, err)
	}
	if w, err := head.Wait(context.Background(), 0); w || err != nil {
		t.Fatalf("second Wait = %v, %v; want nothing pending", w, err)
	}
	if s := h.Stats(); s.Notified != 1 || s.Duplicates != 2 {
		t.Fatalf("stats %+v; want 1 wake-up and 2 duplicates", s)
	}
}

// However many keys and waiters, each node sees one connection of the
// Hub, subscribed to every waited-for key's channel; when the last waiter
// of a key leaves, the channel is unsubscribed (PUBSUB CHANNELS empty once
// all left), and the connection stays for the next waiters until Close.
func TestOneConnectionPerNode(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	h := newHub(t, addrs(nodes), handoff.Config{})
	const keys, perKey = 20, 3
	var turns []*handoff.Turn
	var names []string
	for k := 0; k < keys; k++ {
		names = append(names, fmt.Sprintf("key-%d", k))
		for w := 0; w < perKey; w++ {
			turns = append(turns, h.EnterWant(names[k], nil))
		}
	}
	subscribed(t, addrs(nodes), 1, names...)
	for _, n := range nodes {
		cs := clients(t, n.Addr, hubName)
		if len(cs) != 1 || cs[0].subs() != keys {
			t.Fatalf("%s: hub connections %v; want one, subscribed to %d channels", n.Addr, cs, keys)
		}
	}
	// Two of a key's three waiters leave: it stays subscribed, and a
	// notification still reaches the remaining one (now head).
	turns[0].Leave()
	turns[1].Leave()
	ch := waitAsync(context.Background(), turns[2], hang)
	if r := get(t, ch); !r.woken { // promoted to head
		t.Fatalf("promotion: %+v", r)
	}
	ch = waitAsync(context.Background(), turns[2], hang)
	publish(t, nodes[1].Addr, names[0], "")
	if r := get(t, ch); !r.woken || r.err != nil {
		t.Fatalf("remaining waiter: %+v; want woken by the notification", r)
	}
	for _, tn := range turns {
		tn.Leave()
	}
	for _, n := range nodes {
		until(t, "PUBSUB CHANNELS empty on "+n.Addr, func() bool {
			v, err := do(t, n.Addr, "pubsub", "channels")
			return err == nil && len(v.([]interface{})) == 0
		})
		if cs := clients(t, n.Addr, hubName); len(cs) != 1 || cs[0].subs() != 0 {
			t.Fatalf("%s: hub connections after all left %v; want the one, subscribed to nothing", n.Addr, cs)
		}
	}
	h.Close()
	for _, n := range nodes {
		until(t, "hub connection closed on "+n.Addr, func() bool { return len(clients(t, n.Addr, hubName)) == 0 })
	}
}

// A node killed and restarted: while it is down, the head's waits end by
// their timer and the other nodes' notifications still wake it; after the
// restart, go-redis's PubSub reconnects and subscribes the new connection
// to the key again (the health check is set out of reach, so nothing else
// can), also to a key first waited for while the node was down; a PUBLISH
// on the restarted node wakes the waiters again.
func TestNodeRestart(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	h := newHub(t, addrs(nodes), handoff.Config{HealthCheck: time.Hour})
	head := h.EnterWant("k", nil)
	defer head.Leave()
	subscribed(t, addrs(nodes), 1, "k")

	nodes[0].Kill()
	until(t, "the read error of the killed node", func() bool { return h.Stats().ReceiveErrors > 0 })
	if w, err := head.Wait(context.Background(), 10*time.Millisecond); w || err != nil {
		t.Fatalf("Wait with a node down = %v, %v; want the timer", w, err)
	}
	ch := waitAsync(context.Background(), head, hang)
	publish(t, nodes[1].Addr, "k", "")
	if r := get(t, ch); !r.woken {
		t.Fatalf("notification from a live node: %+v", r)
	}
	other := h.EnterWant("k2", nil) // subscribed while node 0 is down
	defer other.Leave()
	subscribed(t, []string{nodes[1].Addr, nodes[2].Addr}, 1, "k2")

	if err := nodes[0].Up(); err != nil {
		t.Fatal(err)
	}
	subscribed(t, []string{nodes[0].Addr}, 1, "k", "k2")
	for _, key := range []string{"k", "k2"} {
		tn := head
		if key == "k2" {
			tn = other
		}
		ch := waitAsync(context.Background(), tn, hang)
		if r := publishUntil(t, nodes[0].Addr, key, ch); !r.woken || r.err != nil {
			t.Fatalf("%s after the restart: %+v; want woken by the notification", key, r)
		}
	}
	s := h.Stats()
	t.Logf("stats %+v", s)
	if s.Reconnects < 1 || s.Stalls != 0 || s.Timer != 1 || s.Notified != 3 {
		t.Fatalf("stats %+v; want a reconnect, no stall, 1 timer, 3 notifications", s)
	}
	if cs := clients(t, nodes[0].Addr, hubName); len(cs) != 1 || cs[0].subs() != 2 {
		t.Fatalf("restarted node: hub connections %v; want one, subscribed to 2 channels", cs)
	}
}

// A partition that drops every byte (the connection stays open, no error
// ever comes): the health check finds the connection stalled and replaces
// it; waits end by their timer meanwhile; once healed, the new connection
// subscribes the key again and a PUBLISH wakes the head.
func TestPartitionedNode(t *testing.T) {
	nodes := harness.Start(t, 1, harness.Config{})
	p, err := harness.NewProxy(func() string { return nodes[0].Addr })
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	h := newHub(t, []string{p.Addr}, handoff.Config{HealthCheck: 100 * time.Millisecond})
	head := h.EnterWant("k", nil)
	defer head.Leave()
	subscribed(t, addrs(nodes), 1, "k")

	p.Set(harness.Blackhole)
	until(t, "a stall", func() bool { return h.Stats().Stalls > 0 })
	if w, err := head.Wait(context.Background(), 10*time.Millisecond); w || err != nil {
		t.Fatalf("Wait while partitioned = %v, %v; want the timer", w, err)
	}
	p.Heal()
	ch := waitAsync(context.Background(), head, hang)
	if r := publishUntil(t, nodes[0].Addr, "k", ch); !r.woken || r.err != nil {
		t.Fatalf("after healing: %+v; want woken by the notification", r)
	}
	s := h.Stats()
	t.Logf("stats %+v", s)
	if s.Reconnects < 1 || s.Notified < 1 {
		t.Fatalf("stats %+v; want a reconnect and a notification", s)
	}
}

// Close with waiters active (heads and waiters behind them, on several
// keys) ends every Wait with ErrClosed and the Hub's goroutines
// (goleak checks them when the package's tests end) and closes its
// connections; so it does with a node frozen (SIGSTOP).
func TestCloseWithWaiters(t *testing.T) {
	for _, frozen := range []bool{false, true} {
		t.Run(fmt.Sprintf("frozen=%v", frozen), func(t *testing.T) {
			nodes := harness.Start(t, 3, harness.Config{})
			h := newHub(t, addrs(nodes), handoff.Config{})
			var chs []<-chan result
			for k := 0; k < 4; k++ {
				for w := 0; w < 3; w++ {
					tn := h.EnterWant(fmt.Sprintf("k%d", k), nil)
					defer tn.Leave()
					chs = append(chs, waitAsync(context.Background(), tn, hang))
				}
			}
			subscribed(t, addrs(nodes), 1, "k0", "k1", "k2", "k3")
			if frozen {
				nodes[0].Freeze()
				defer nodes[0].Thaw()
			}
			h.Close()
			for i, ch := range chs {
				if r := get(t, ch); r.woken || !errors.Is(r.err, handoff.ErrClosed) {
					t.Fatalf("waiter %d: %+v; want ErrClosed", i, r)
				}
			}
			if frozen {
				nodes[0].Thaw()
			}
			for _, n := range nodes {
				until(t, "hub connection closed on "+n.Addr, func() bool { return len(clients(t, n.Addr, hubName)) == 0 })
			}
		})
	}
}

// Others tells a Hub whether another Hub (another process) waits for a
// key: the nodes count more subscribers of its channel than the Hub's own.
// Each call asks one node, in turn; a Hub with no node to ask says so.
func TestOthersCountsOtherHubs(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	a := newHub(t, addrs(nodes), handoff.Config{})
	b := newHub(t, addrs(nodes), handoff.Config{})
	ctx := context.Background()
	ta := a.EnterWant("k", nil)
	defer ta.Leave()
	subscribed(t, addrs(nodes), 1, "k")
	for range nodes { // every node in turn
		if others, err := a.Others(ctx, "k"); err != nil || others {
			t.Fatalf("alone: Others = %v, %v; want false", others, err)
		}
	}
	tb := b.EnterWant("k", nil)
	subscribed(t, addrs(nodes), 2, "k")
	for range nodes {
		if others, err := a.Others(ctx, "k"); err != nil || !others {
			t.Fatalf("with another hub waiting: Others = %v, %v; want true", others, err)
		}
	}
	tb.Leave()
	subscribed(t, addrs(nodes), 1, "k")
	if others, err := a.Others(ctx, "k"); err != nil || others {
		t.Fatalf("after the other left: Others = %v, %v; want false", others, err)
	}
	nodes[0].Stop()
	var failed bool
	for range nodes {
		_, err := a.Others(ctx, "k")
		failed = failed || err != nil
	}
	if !failed {
		t.Fatal("Others on a stopped node returned no error")
	}
	local, err := handoff.New(nil, handoff.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	if _, err := local.Others(ctx, "k"); !errors.Is(err, handoff.ErrNoSubscriber) {
		t.Fatalf("no node: err = %v, want ErrNoSubscriber", err)
	}
}
