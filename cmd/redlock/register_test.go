package main

import (
	"context"
	"strings"
	"testing"
	"time"
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
