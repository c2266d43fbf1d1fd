package core

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/observe"
)

// statInt reads one field of INFO from a node.
func statInt(t *testing.T, n *harness.Node, section, field string) int {
	t.Helper()
	cl := n.Client()
	defer cl.Close()
	info, err := cl.Info(context.Background(), section).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			k, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("INFO %s: %s: %v", section, field, err)
			}
			return k
		}
	}
	t.Fatalf("INFO %s has no %s", section, field)
	return 0
}

// One server named twice (another database, another spelling of
// localhost) would cast two votes: refused before anything is sent to it.
func TestOneServerTwiceRefusedBeforeTraffic(t *testing.T) {
	nodes := harness.Start(t, 2, harness.Config{})
	a, b := nodes[0], nodes[1]
	before := statInt(t, a, "stats", "total_connections_received")
	port := strconv.Itoa(a.Port)
	for _, urls := range [][]string{
		{"redis://" + a.Addr + "/0", b.URL(), "redis://" + a.Addr + "/1"},
		{"redis://localhost:" + port, b.URL(), a.URL()},
	} {
		c, err := harness.NewClient(t, urls)
		if err == nil {
			_, lerr := c.TryLock(context.Background(), "k", time.Second)
			c.Close()
			t.Fatalf("%q accepted as three nodes (TryLock: %v): server %s alone makes the quorum", urls, lerr, a.Addr)
		}
		if !errors.Is(err, redlock.ErrInvalidArgument) || !strings.Contains(err.Error(), "nodes 0 and 2 are the same server") {
			t.Fatalf("%q: %v, want ErrInvalidArgument naming nodes 0 and 2", urls, err)
		}
	}
	// The reading above took one connection; the refused Clients none.
	if got := statInt(t, a, "stats", "total_connections_received"); got != before+1 {
		t.Fatalf("server got %d connections from refused Clients", got-before-1)
	}
}

// Release returns at quorum while the release to a slow node is still on
// its way. An immediate TryLock of the same key from the same Client must
// not overtake it on that node (it would find our own leftover and say no):
// the acquisition waits for that release there. The proxy holds exactly the
// release to node 4 back, after node 4 has answered the acquisition.
func TestNextLockDoesNotOvertakeOwnRelease(t *testing.T) {
	var mu sync.Mutex
	var votes []bool // node 4's answers to acquisitions, in order
	answered := make(chan struct{}, 16)
	var p *harness.Proxy // set before the first lock call
	c, nodes, p := behindProxy(t, redlock.WithNodeTimeout(2*time.Second),
		redlock.WithNodeObserver(func(e observe.NodeEvent) {
			if e.Addr != p.Addr || e.Op != "acquire" {
				return
			}
			mu.Lock()
			votes = append(votes, e.Vote && e.Err == nil)
			mu.Unlock()
			answered <- struct{}{}
		}))
	ctx := context.Background()
	const cycles = 3
	for i := 0; i < cycles; i++ {
		l, err := c.TryLock(ctx, "k", 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		<-answered                          // node 4 has answered this acquisition
		p.DelayNext(300 * time.Millisecond) // ... so this holds the release
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c.Close() // waits for every node call
	mu.Lock()
	defer mu.Unlock()
	for i, v := range votes {
		if !v {
			t.Fatalf("node 4 refused acquisition %d of %d (answers %v): the TryLock overtook this Client's own release", i+1, cycles, votes)
		}
	}
	if len(votes) != cycles {
		t.Fatalf("node 4 answered %d acquisitions, want %d", len(votes), cycles)
	}
	if vals, _ := raw(t, nodes, "k"); count(vals, "") != 5 {
		t.Fatalf("key left behind: %q", vals)
	}
}

// Extend with a ctx that is already done sends nothing: the nodes keep the
// TTL they had, and the error says why.
func TestExtendWithDoneContextSendsNothing(t *testing.T) {
	c, nodes := setup(t, 3)
	l, err := c.TryLock(context.Background(), "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the key on every node", func() bool { vals, _ := raw(t, nodes, "k"); return count(vals, "") == 0 })
	before := make([]int, len(nodes)) // the identity reads and TTL register publishes of the TryLock
	for i, n := range nodes {
		before[i] = scriptCalls(t, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = l.Extend(ctx, time.Minute)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, redlock.ErrNotExtended) {
		t.Fatalf("Extend with a done ctx = %v, want context.Canceled and ErrNotExtended", err)
	}
	c.Close() // waits for anything still in flight
	for i, n := range nodes {
		// The acquisition was a SET NX; an Extend would be a script.
		if k := scriptCalls(t, n) - before[i]; k != 0 {
			t.Fatalf("node %d ran %d scripts for an Extend with a done ctx", i, k)
		}
	}
	if _, ttls := raw(t, nodes, "k"); ttls[0] > 10*time.Second || l.Remaining() <= 0 {
		t.Fatalf("PTTL %v after refused Extend; Remaining %v", ttls, l.Remaining())
	}
}
