package handoff

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/internal/handoff"
)

// A node whose ACL does not grant the channels (&redlock:released:*)
// refuses the SUBSCRIBE: the Hub counts it, keeps its connection, and the
// waits end by their timer. Granting the channels is what makes
// notifications work.
func TestSubscribeWithoutChannelPermission(t *testing.T) {
	nodes := harness.Start(t, 1, harness.Config{})
	for user, channels := range map[string]string{"denied": "resetchannels", "granted": "&redlock:released:*"} {
		if _, err := do(t, nodes[0].Addr, "acl", "setuser", user, "reset", "on", ">pw", "+hello", "+client", "+ping",
			"+subscribe", "+unsubscribe", channels); err != nil {
			t.Fatal(err)
		}
	}
	hub := func(user string) *handoff.Hub {
		c := redis.NewClient(&redis.Options{Addr: nodes[0].Addr, Username: user, Password: "pw", ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		h, err := handoff.New([]redis.UniversalClient{c}, handoff.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(h.Close)
		return h
	}
	denied := hub("denied")
	tn := denied.EnterWant("k", nil)
	defer tn.Leave()
	until(t, "the refused SUBSCRIBE", func() bool { return denied.Stats().SubscribeErrors > 0 })
	if w, err := tn.Wait(context.Background(), 10*time.Millisecond); w || err != nil {
		t.Fatalf("Wait = %v, %v; want the timer", w, err)
	}
	if s := denied.Stats(); s.ReceiveErrors != 0 || s.Stalls != 0 {
		t.Fatalf("stats %+v; want the connection kept", s)
	}

	granted := hub("granted")
	head := granted.EnterWant("k2", nil)
	defer head.Leave()
	subscribed(t, addrs(nodes), 1, "k2")
	ch := waitAsync(context.Background(), head, hang)
	publish(t, nodes[0].Addr, "k2", "")
	if r := get(t, ch); !r.woken || r.err != nil {
		t.Fatalf("granted: %+v; want woken", r)
	}
}

// A user without any pub/sub permission (the minimal ACL line of docs/deployment.md)
// refuses SUBSCRIBE, UNSUBSCRIBE and PING. The Hub holds its subscriptions
// back after a refusal (doubling from a second) instead of sending one for
// every key that gets a waiter, never takes the refused replies for a
// stalled connection, and subscribes once the permission is granted.
func TestRefusedSubscribeIsHeldBack(t *testing.T) {
	nodes := harness.Start(t, 1, harness.Config{})
	addr := nodes[0].Addr
	if _, err := do(t, addr, "acl", "setuser", "minimal", "reset", "on", ">pw", "+hello", "+client", "resetchannels"); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: addr, Username: "minimal", Password: "pw", ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	h, err := handoff.New([]redis.UniversalClient{c}, handoff.Config{HealthCheck: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	begin := time.Now()
	for i := 0; i < 40; i++ { // a waiter for each of 40 keys in turn, each outliving several health checks
		tn := h.EnterWant("k"+strconv.Itoa(i), nil)
		if w, err := tn.Wait(context.Background(), 50*time.Millisecond); w || err != nil {
			t.Fatalf("Wait = %v, %v; want the timer", w, err)
		}
		tn.Leave()
	}
	s := h.Stats()
	t.Logf("%d keys in %v: %+v", 40, time.Since(begin), s)
	// At most a few replies per hold-off, and hold-offs last a second or more.
	if bound := uint64(4 + 4*time.Since(begin)/time.Second); s.SubscribeErrors == 0 || s.SubscribeErrors > bound {
		t.Fatalf("stats %+v; want 1 to %d refusals in %v", s, bound, time.Since(begin))
	}
	if s.Stalls != 0 || s.ReceiveErrors != 0 {
		t.Fatalf("stats %+v; want the connection kept: refusals are answers", s)
	}
	if _, err := do(t, addr, "acl", "setuser", "minimal", "+subscribe", "+unsubscribe", "+ping", "&redlock:released:*"); err != nil {
		t.Fatal(err)
	}
	tn := h.EnterWant("granted", nil)
	defer tn.Leave()
	subscribed(t, []string{addr}, 1, "granted")
}
