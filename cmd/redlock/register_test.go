package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// doctor and inspect show the restart quarantine's TTL registers: after a
// Client held a 30 s lock, each node's register lists it, and doctor's
// restart-window row says a restart would cost at most 30 s, set by the
// register.
func TestRegisterShown(t *testing.T) {
	urls := nodes(t, 3)
	ctx := context.Background()
	c := typedClient(t, urls, "reg")
	l, err := c.TryLock(ctx, "lock:reg", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	c.Close() // every node call returned: each node has published

	code, out, errOut := runCmd(t, "inspect", "lock:*", "--nodes", strings.Join(urls, ","))
	if code != exitOK || !strings.Contains(out, "restart quarantine TTL registers (redlock:ttl):") || strings.Count(out, ": 30s (") != len(urls) {
		t.Fatalf("inspect: exit %d, want every node's register with its 30s entry\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = doctorRun(t, urls, "--node-timeout", "1s")
	if code != exitOK && code != 1 {
		t.Fatalf("doctor: exit %d\n%s%s", code, out, errOut)
	}
	for _, u := range urls {
		v, reason := row(t, out, u, checkRestartWindow)
		if v != verdictOK || !strings.Contains(reason, "TTL register here: 30s (") || !strings.Contains(reason, "at most 3") || !strings.Contains(reason, "bound: register") {
			t.Errorf("%s restart-window: %s %s", u, v, reason)
		}
	}
}

// inspect "*" does not take the library's per-node keys for locks: the TTL
// register, the legacy max-TTL key and the register's AOF stamp (a hash
// that durable Clients write and that never expires).
func TestInspectSkipsRegisterKeys(t *testing.T) {
	urls := nodes(t, 3)
	ctx := context.Background()
	for _, u := range urls {
		o, err := redis.ParseURL(u)
		if err != nil {
			t.Fatal(err)
		}
		c := redis.NewClient(o)
		err = c.HSet(ctx, "{redlock:ttl}:aof", "aof", "run-a", "prev", "run-b").Err()
		if err == nil {
			err = c.HSet(ctx, "redlock:ttl", "400", time.Now().Add(time.Minute).UnixMilli()).Err()
		}
		if err == nil {
			err = c.Set(ctx, "redlock:max-ttl", 5000, 0).Err()
		}
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := runCmd(t, "inspect", "--json", "--nodes", strings.Join(urls, ","), "*")
	if code != exitOK || strings.TrimSpace(out) != "[]" {
		t.Fatalf("inspect: exit %d, want no keys (none is a lock):\n%s%s", code, out, errOut)
	}
}
