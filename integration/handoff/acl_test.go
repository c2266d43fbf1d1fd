package handoff

import (
	"context"
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
	tn := denied.Enter("k")
	defer tn.Leave()
	until(t, "the refused SUBSCRIBE", func() bool { return denied.Stats().SubscribeErrors > 0 })
	if w, err := tn.Wait(context.Background(), 10*time.Millisecond); w || err != nil {
		t.Fatalf("Wait = %v, %v; want the timer", w, err)
	}
	if s := denied.Stats(); s.ReceiveErrors != 0 || s.Stalls != 0 {
		t.Fatalf("stats %+v; want the connection kept", s)
	}

	granted := hub("granted")
	head := granted.Enter("k2")
	defer head.Leave()
	subscribed(t, addrs(nodes), 1, "k2")
	ch := waitAsync(context.Background(), head, hang)
	publish(t, nodes[0].Addr, "k2", "")
	if r := get(t, ch); !r.woken || r.err != nil {
		t.Fatalf("granted: %+v; want woken", r)
	}
}
