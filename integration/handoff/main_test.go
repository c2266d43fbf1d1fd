// Package handoff tests the waiting side of the lock (package
// github.com/redlock-go/redlock/handoff) against real redis-server
// processes started by the harness.
package handoff

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/internal/handoff"
	"github.com/redlock-go/redlock/transport"
)

func TestMain(m *testing.M) {
	harness.QuietRedisLogs()
	goleak.VerifyTestMain(m, append(harness.IgnoreRedial(), harness.IgnoreRedisDial())...)
}

// hubName names every connection of the hubs' clients on the nodes, so
// that CLIENT LIST tells them from the tests' own.
const hubName = "handoff-hub"

// hang bounds what must happen (a wait for an event): reaching it fails
// the test as a hang, it is never a verdict on speed.
const hang = 2 * time.Minute

// newHub returns a Hub over one client per address, closed (Hub first,
// then the clients) when the test ends.
func newHub(t *testing.T, addrs []string, cfg handoff.Config) *handoff.Hub {
	t.Helper()
	if tr := harness.Transport(); tr != "goredis" {
		return newHubConns(t, tr, addrs, cfg)
	}
	clients := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, ContextTimeoutEnabled: true, MaxRetries: -1, ClientName: hubName})
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	h, err := handoff.New(clients, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// newHubConns is newHub over the transport REDLOCK_TRANSPORT names.
func newHubConns(t *testing.T, tr string, addrs []string, cfg handoff.Config) *handoff.Hub {
	t.Helper()
	conns := make([]transport.Conn, len(addrs))
	for i, a := range addrs {
		c, closeFn, err := harness.OpenConn(tr, "redis://"+a+"?client_name="+hubName)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(closeFn)
		conns[i] = c
	}
	h, err := handoff.NewConns(conns, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

func addrs(nodes []*harness.Node) []string {
	a := make([]string, len(nodes))
	for i, n := range nodes {
		a[i] = n.Addr
	}
	return a
}

// do runs one command on the node at addr with a plain client.
func do(t *testing.T, addr string, args ...interface{}) (interface{}, error) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Do(ctx, args...).Result()
}

// publish announces the release of key on the node, as the release
// script does, with payload.
func publish(t *testing.T, addr, key, payload string) {
	t.Helper()
	if _, err := do(t, addr, "publish", handoff.Channel(key), payload); err != nil {
		t.Fatalf("PUBLISH on %s: %v", addr, err)
	}
}

// numsub returns how many connections of the node at addr subscribe to
// key's channel (-1 if the node does not answer).
func numsub(t *testing.T, addr, key string) int {
	t.Helper()
	v, err := do(t, addr, "pubsub", "numsub", handoff.Channel(key))
	if err != nil {
		return -1
	}
	var n int64 = -1
	switch v := v.(type) {
	case []interface{}: // RESP2: [channel, count]
		n, _ = v[1].(int64)
	case map[interface{}]interface{}: // RESP3
		n, _ = v[handoff.Channel(key)].(int64)
	}
	return int(n)
}

// until polls cond until it holds; what says what it waits for.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hang)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("hang: still waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// subscribed waits until every node at addrs has exactly want subscribers
// of each key's channel.
func subscribed(t *testing.T, addrs []string, want int, keys ...string) {
	t.Helper()
	for _, a := range addrs {
		for _, k := range keys {
			until(t, fmt.Sprintf("%d subscriber(s) of %s on %s", want, handoff.Channel(k), a),
				func() bool { return numsub(t, a, k) == want })
		}
	}
}

// client is one line of CLIENT LIST.
type client map[string]string

// clients returns the node's connections named name.
func clients(t *testing.T, addr, name string) []client {
	t.Helper()
	v, err := do(t, addr, "client", "list")
	if err != nil {
		t.Fatalf("CLIENT LIST on %s: %v", addr, err)
	}
	var out []client
	for _, line := range strings.Split(strings.TrimSpace(fmt.Sprint(v)), "\n") {
		c := client{}
		for _, f := range strings.Fields(line) {
			if k, v, ok := strings.Cut(f, "="); ok {
				c[k] = v
			}
		}
		if c["name"] == name && !commandConn(c) {
			out = append(out, c)
		}
	}
	return out
}

// commandConn reports, via transports other than go-redis, the client's own
// command connection: rueidis and valkey-go keep one open from the start
// (the test closes it after the Hub), beside the Hub's pub/sub connection.
func commandConn(c client) bool {
	if harness.Transport() == "goredis" || strings.Contains(c["flags"], "P") {
		return false
	}
	switch c["cmd"] {
	case "subscribe", "unsubscribe", "ping":
		return false
	}
	return true
}

func (c client) subs() int { n, _ := strconv.Atoi(c["sub"]); return n }

type result struct {
	woken bool
	err   error
}

func waitAsync(ctx context.Context, tn *handoff.Turn, d time.Duration) <-chan result {
	ch := make(chan result, 1)
	go func() {
		w, err := tn.Wait(ctx, d)
		ch <- result{w, err}
	}()
	return ch
}

func get(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(hang):
		t.Fatal("hang: Wait did not return")
		return result{}
	}
}

// publishUntil publishes key's release on the node at addr again and again
// until the Wait behind ch returns, and returns its result: for a
// subscription that is being re-established, where one PUBLISH may come
// before it is in place (or reach a connection about to be replaced).
func publishUntil(t *testing.T, addr, key string, ch <-chan result) result {
	t.Helper()
	deadline := time.Now().Add(hang)
	for {
		if _, err := do(t, addr, "publish", handoff.Channel(key), ""); err != nil && time.Now().After(deadline) {
			t.Fatalf("hang: PUBLISH on %s: %v", addr, err)
		}
		select {
		case r := <-ch:
			return r
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("hang: Wait did not return")
		}
	}
}
