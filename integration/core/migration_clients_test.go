package core

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
)

// A service moving from go-redsync reuses its go-redis clients. Made as
// go-redsync's examples make them (go-redis's defaults: retries on,
// context deadlines not reaching the socket), three dead nodes of five
// mostly read "timed out" and a TryLock waits for their node deadline; made with
// the settings docs/migration.md gives (ContextTimeoutEnabled,
// MaxRetries -1), they read "connection refused" and TryLock returns as
// soon as they refused.
func TestMigrationReusedClients(t *testing.T) {
	nodes := harness.Start(t, 5, harness.Config{})
	ctx := context.Background()
	cs := map[bool]*redlock.Client{}
	for _, recommended := range []bool{false, true} {
		clients := make([]redis.UniversalClient, len(nodes))
		for i, n := range nodes {
			opt := &redis.Options{Addr: n.Addr}
			if recommended {
				opt.ContextTimeoutEnabled, opt.MaxRetries, opt.DialerRetries = true, -1, 1
			}
			cl := redis.NewClient(opt)
			t.Cleanup(func() { _ = cl.Close() })
			clients[i] = cl
		}
		c, err := redlock.New(clients) // the default node timeout, 50 ms
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		cs[recommended] = c
		// Every node met before the kills: a server that another test
		// starts on a freed port within a second is then a restart, not
		// a node met for the first time.
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second) // Lock retries: a loaded machine may miss a 50 ms node deadline
		l, err := c.Lock(wctx, "mig:warm", time.Second)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Release(ctx)
	}
	for _, n := range nodes[2:] {
		n.Kill()
	}
	took := map[bool]time.Duration{}
	for _, recommended := range []bool{false, true} {
		c := cs[recommended]
		var times []time.Duration
		var msg string
		for range 9 {
			start := time.Now()
			_, err := c.TryLock(ctx, "mig:clients", 8*time.Second)
			times = append(times, time.Since(start))
			if !errors.Is(err, redlock.ErrNotObtained) {
				t.Fatalf("TryLock with 2 of 5 nodes up: %v, want ErrNotObtained", err)
			}
			msg = err.Error()
		}
		slices.Sort(times)
		took[recommended] = times[len(times)/2]
		t.Logf("recommended settings %v: TryLock median %v: %s", recommended, took[recommended].Round(time.Millisecond), msg)
		// With go-redis's defaults a refused dial is retried, and whether
		// it ends as "timed out" or "connection refused" within the node
		// deadline depends on the machine's speed: only the recommended
		// settings' words are held.
		if want := "3 of 5 nodes unreachable"; recommended && (!strings.Contains(msg, want) || strings.Contains(msg, "timed out")) {
			t.Errorf("recommended settings: the dead nodes do not read %q: %s", want, msg)
		}
	}
	if took[true] >= took[false] {
		t.Errorf("TryLock median %v with the recommended settings, %v without: want faster", took[true], took[false])
	}
}

// A lock passed from one goroutine of a Client to another (local
// hand-off) keeps the deadline of the acquisition on the nodes: it arrives
// with the TTL less the time it was already held, not with a fresh TTL as
// a go-redsync Lock after Unlock would.
func TestMigrationPassedLockKeepsDeadline(t *testing.T) {
	c, _ := setup(t, 3)
	ctx := context.Background()
	const ttl, held = 8 * time.Second, 100 * time.Millisecond // within a run of passes (WithLocalHandoff's run)
	first, err := c.Lock(ctx, "mig:passed", ttl)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *redlock.Lock, 1)
	go func() {
		l, err := c.Lock(ctx, "mig:passed", ttl)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	time.Sleep(held)
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	second := <-got
	if second == nil {
		return
	}
	defer second.Release(ctx)
	left := second.Remaining()
	t.Logf("passed lock: %v of its %v TTL left", left.Round(time.Millisecond), ttl)
	if !second.Deadline().Equal(first.Deadline()) {
		t.Fatalf("the second holder's deadline %v is not the first's %v: acquired anew, not passed", second.Deadline(), first.Deadline())
	}
	if most := ttl - held; left > most {
		t.Fatalf("passed lock with %v left, want at most %v (the TTL less the first hold)", left, most)
	}
	if !errors.Is(first.Err(), redlock.ErrReleased) {
		t.Errorf("first holder's Err: %v", first.Err())
	}
}
