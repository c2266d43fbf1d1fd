package core

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/admin"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/observe"
)

// hashes reads key as a hash on every node (nil where absent).
func hashes(t testing.TB, nodes []*harness.Node, key string) []map[string]string {
	t.Helper()
	out := make([]map[string]string, len(nodes))
	for i, n := range nodes {
		c := n.Client()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		h, err := c.HGetAll(ctx, key).Result()
		cancel()
		c.Close()
		if err != nil {
			t.Fatalf("HGETALL on %s: %v", n.Addr, err)
		}
		if len(h) > 0 {
			out[i] = h
		}
	}
	return out
}

// entries counts the holders' fields of a typed lock's hash.
func entries(h map[string]string) int {
	n := 0
	for f := range h {
		if strings.Contains(f, ":") { // an owner value; metadata fields have no colon
			n++
		}
	}
	return n
}

// countNodes counts the nodes whose reading v satisfies ok.
func countNodes[T any](vs []T, ok func(T) bool) int {
	n := 0
	for _, v := range vs {
		if ok(v) {
			n++
		}
	}
	return n
}

func mustErr(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("err = %v, want %v", err, want)
	}
}

func TestReentrant(t *testing.T) {
	c, nodes := setup(t, 3)
	other := client(t, nodes)
	ctx := context.Background()
	outer, err := c.Lock(ctx, "re", 10*time.Second, redlock.Reentrant())
	if err != nil {
		t.Fatal(err)
	}
	if outer.Kind() != observe.KindReentrant {
		t.Fatalf("Kind = %q", outer.Kind())
	}
	in := redlock.WithLock(ctx, outer)
	inner, err := c.Lock(in, "re", 10*time.Second, redlock.Reentrant())
	if err != nil {
		t.Fatalf("re-entry: %v", err)
	}
	again, err := c.TryLock(in, "re", 10*time.Second, redlock.Reentrant())
	if err != nil {
		t.Fatalf("second re-entry: %v", err)
	}
	// Calls return at quorum: a quorum of nodes holds all three entries.
	if n := countNodes(hashes(t, nodes, "re"), func(h map[string]string) bool { return entries(h) == 3 && h["#holder"] == outer.Owner() }); n < 2 {
		t.Fatalf("%d nodes hold 3 entries of %s, want a quorum: %v", n, outer.Owner(), hashes(t, nodes, "re"))
	}
	_, err = other.TryLock(ctx, "re", time.Second, redlock.Reentrant())
	mustErr(t, err, redlock.ErrNotObtained)
	_, err = c.TryLock(in, "re", time.Second) // not reentrant: would wait for itself
	mustErr(t, err, redlock.ErrHeldByCaller)
	_, err = c.TryLock(in, "re", time.Second, redlock.WriteLock())
	mustErr(t, err, redlock.ErrHeldByCaller)

	// Entries end in any order; the key goes with the last.
	for i, l := range []*redlock.Lock{outer, again} {
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
		if _, err := other.TryLock(ctx, "re", time.Second, redlock.Reentrant()); !errors.Is(err, redlock.ErrNotObtained) {
			t.Fatalf("after release %d of 3, another holder got in: %v", i+1, err)
		}
	}
	if err := inner.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close() // waits for the releases still in flight
	for i, h := range hashes(t, nodes, "re") {
		if h != nil {
			t.Fatalf("node %d keeps %v after the last release", i, h)
		}
	}
	l, err := other.TryLock(ctx, "re", time.Second, redlock.Reentrant())
	if err != nil {
		t.Fatalf("after the last release: %v", err)
	}
	_ = l.Release(ctx)
}

// A re-entry never re-creates a lost lock: after the key is gone from the
// nodes it is refused and writes nothing; once the Lock has seen the loss,
// it is refused before any traffic with the loss as cause.
func TestReentryAfterLossFails(t *testing.T) {
	c, nodes := setup(t, 3)
	ctx := context.Background()
	outer, err := c.Lock(ctx, "gone", 10*time.Second, redlock.Reentrant())
	if err != nil {
		t.Fatal(err)
	}
	// Lock returns at quorum: delete once every node has the key, so that
	// no acquisition still in flight writes it after the delete.
	until := time.Now().Add(20 * time.Second)
	for countNodes(hashes(t, nodes, "gone"), func(h map[string]string) bool { return entries(h) == 1 }) < len(nodes) {
		if time.Now().After(until) {
			t.Fatal("the acquisition did not reach every node")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, n := range nodes {
		cl := n.Client()
		cl.Del(ctx, "gone")
		cl.Close()
	}
	in := redlock.WithLock(ctx, outer)
	_, err = c.TryLock(in, "gone", time.Second, redlock.Reentrant())
	mustErr(t, err, redlock.ErrNotObtained)
	if h := hashes(t, nodes, "gone"); h[0] != nil || h[1] != nil || h[2] != nil {
		t.Fatalf("a re-entry re-created the key: %v", h)
	}
	mustErr(t, outer.Extend(ctx, 10*time.Second), redlock.ErrLockLost)
	_, err = c.Lock(in, "gone", time.Second, redlock.Reentrant())
	mustErr(t, err, redlock.ErrLockLost)
	mustErr(t, err, redlock.ErrNotObtained)
}

func TestReadWrite(t *testing.T) {
	c, nodes := setup(t, 3)
	w := client(t, nodes)
	ctx := context.Background()
	r1, err := c.Lock(ctx, "rw", 10*time.Second, redlock.ReadLock())
	if err != nil {
		t.Fatal(err)
	}
	r2, err := w.Lock(ctx, "rw", 10*time.Second, redlock.ReadLock())
	if err != nil {
		t.Fatalf("second reader: %v", err)
	}
	// A refused writer keeps new readers out for 4 x its backoff max:
	// 40 s here, so the check does not depend on how fast the machine is.
	slow := redlock.WithRetryBackoff(time.Millisecond, 10*time.Second)
	_, err = w.TryLock(ctx, "rw", 10*time.Second, redlock.WriteLock(), slow)
	mustErr(t, err, redlock.ErrNotObtained)
	_, err = c.TryLock(ctx, "rw", 10*time.Second, redlock.ReadLock())
	mustErr(t, err, redlock.ErrNotObtained)
	_, err = c.TryLock(redlock.WithLock(ctx, r1), "rw", time.Second, redlock.WriteLock())
	mustErr(t, err, redlock.ErrHeldByCaller) // upgrade

	got := make(chan *redlock.Lock, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		l, err := w.Lock(wctx, "rw", 10*time.Second, redlock.WriteLock(), slow)
		if err != nil {
			t.Errorf("writer: %v", err)
		}
		got <- l
	}()
	for _, r := range []*redlock.Lock{r1, r2} {
		if err := r.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wl := <-got
	if wl == nil {
		return
	}
	_, err = c.TryLock(ctx, "rw", 10*time.Second, redlock.ReadLock())
	mustErr(t, err, redlock.ErrNotObtained)
	_, err = c.TryLock(ctx, "rw", 10*time.Second, redlock.WriteLock())
	mustErr(t, err, redlock.ErrNotObtained)
	if err := wl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r3, err := c.Lock(ctx, "rw", 10*time.Second, redlock.ReadLock())
	if err != nil {
		t.Fatalf("reader after the writer: %v", err)
	}
	if err := r3.Extend(ctx, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	// Lock and Extend return at quorum: a quorum holds the new TTL (a
	// node may have refused the reader while the writer's release was on
	// its way there).
	var ttls []time.Duration
	for _, n := range nodes {
		cl := n.Client()
		d, err := cl.PTTL(ctx, "rw").Result()
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		ttls = append(ttls, d)
	}
	if n := countNodes(ttls, func(d time.Duration) bool { return d >= 15*time.Second }); n < 2 {
		t.Fatalf("TTLs %v after Extend by 20s: want a quorum above 15s", ttls)
	}
	_ = r3.Release(ctx)
}

func TestSemaphoreAdmitsAtMostPermits(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	ctx := context.Background()
	var held []*redlock.Lock
	keys := map[string]bool{}
	for i := 0; i < 3; i++ {
		l, err := client(t, nodes).TryLock(ctx, "sem", 10*time.Second, redlock.Permits(3))
		if err != nil {
			t.Fatalf("permit %d of 3: %v", i, err)
		}
		if l.Kind() != observe.KindSemaphore || keys[l.Key()] {
			t.Fatalf("permit %d: kind %q key %q (taken: %v)", i, l.Kind(), l.Key(), keys)
		}
		keys[l.Key()] = true
		held = append(held, l)
	}
	c := client(t, nodes)
	_, err := c.TryLock(ctx, "sem", 10*time.Second, redlock.Permits(3))
	mustErr(t, err, redlock.ErrNotObtained)
	got := make(chan *redlock.Lock, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		l, err := c.Lock(wctx, "sem", 10*time.Second, redlock.Permits(3))
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		got <- l
	}()
	if err := held[1].Release(ctx); err != nil {
		t.Fatal(err)
	}
	if l := <-got; l != nil && l.Key() != held[1].Key() {
		t.Fatalf("waiter got %q, the free permit is %q", l.Key(), held[1].Key())
	}
}

// Permits are plain locks: holders that reach different majorities of the
// nodes still number at most n. A counter per node would let three
// holders of two permits in here: no node sees more than two.
func TestSemaphoreAcrossDifferentMajorities(t *testing.T) {
	nodes := harness.Start(t, 5, harness.Config{})
	urls := harness.URLs(nodes)
	reach := [][]int{{0, 2, 3}, {0, 2, 4}, {1, 3, 4}}
	got := 0
	for _, r := range reach {
		u := make([]string, len(urls))
		for i := range u {
			u[i] = fmt.Sprintf("redis://127.0.0.1:%d", i+1) // refused: this client does not reach node i
		}
		for _, i := range r {
			u[i] = urls[i]
		}
		c, err := harness.NewClient(t, u, redlock.WithNodeTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if _, err := c.TryLock(context.Background(), "sem", 10*time.Second, redlock.Permits(2)); err == nil {
			got++
		} else if !errors.Is(err, redlock.ErrNotObtained) {
			t.Fatal(err)
		}
	}
	if got != 2 {
		t.Fatalf("%d of 3 holders got one of 2 permits, want 2", got)
	}
}

func TestWrongTypeRefused(t *testing.T) {
	c, nodes := setup(t, 3)
	ctx := context.Background()
	rw, err := c.TryLock(ctx, "k", 10*time.Second, redlock.ReadLock())
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.TryLock(ctx, "k", time.Second, redlock.Reentrant())
	mustErr(t, err, redlock.ErrWrongType)
	plain, err := c.TryLock(ctx, "p", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Lock(ctx, "p", time.Second, redlock.WriteLock())
	mustErr(t, err, redlock.ErrWrongType)
	for _, n := range nodes {
		cl := n.Client()
		cl.Set(ctx, "data", "not a lock", 0)
		cl.Close()
	}
	_, err = c.Lock(ctx, "data", time.Second, redlock.ReadLock())
	mustErr(t, err, redlock.ErrWrongType)
	if vals, _ := raw(t, nodes, "data"); count(vals, "not a lock") != 3 {
		t.Fatalf("data changed: %v", vals)
	}
	_ = rw.Release(ctx)
	_ = plain.Release(ctx)
}

func TestTypeOptionsRefusedBeforeTraffic(t *testing.T) {
	c, _ := setup(t, 3)
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"zero permits": func() error { _, err := c.TryLock(ctx, "k", time.Second, redlock.Permits(0)); return err },
		"two types": func() error {
			_, err := c.TryLock(ctx, "k", time.Second, redlock.ReadLock(), redlock.Reentrant())
			return err
		},
		"several keys": func() error {
			_, err := c.TryLockKeys(ctx, []string{"a", "b"}, time.Second, redlock.WriteLock())
			return err
		},
		"fenced typed": func() error {
			_, err := c.TryLock(ctx, "k", time.Second, redlock.ReadLock(), redlock.WithFencing())
			return err
		},
		"type on a New": func() error {
			_, err := harness.NewClient(t, []string{"redis://127.0.0.1:1"}, redlock.ReadLock())
			return err
		},
	} {
		if err := call(); !errors.Is(err, redlock.ErrInvalidArgument) {
			t.Errorf("%s: err = %v, want ErrInvalidArgument", name, err)
		}
	}
}

// Typed locks renew in the background like plain ones: a reader held
// past several leases keeps its entry, and Release removes it.
func TestTypesWatchdog(t *testing.T) {
	c, nodes := setup(t, 3, redlock.WithWatchdog(time.Second, 100*time.Millisecond))
	ctx := context.Background()
	r, err := c.Lock(ctx, "wd", redlock.Watchdog, redlock.ReadLock())
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	if err := r.Err(); err != nil {
		t.Fatalf("reader lost while renewed: %v", err)
	}
	if n := countNodes(hashes(t, nodes, "wd"), func(h map[string]string) bool { return entries(h) == 1 }); n < 2 {
		t.Fatalf("%d nodes hold the renewed reader, want a quorum: %v", n, hashes(t, nodes, "wd"))
	}
	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// Many holders of each type at once, from several Clients: the holders
// counted in this process never break the type's rule.
func TestTypesContention(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	clients := []*redlock.Client{client(t, nodes), client(t, nodes), client(t, nodes)}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	var readers, writers, permits, re atomic.Int32
	var mu sync.Mutex
	var bad []string
	fail := func(f string, a ...any) {
		mu.Lock()
		bad = append(bad, fmt.Sprintf(f, a...))
		mu.Unlock()
	}
	var n atomic.Int32
	var wg sync.WaitGroup
	for g := 0; g < 12; g++ {
		wg.Add(1)
		go func(c *redlock.Client, g int) {
			defer wg.Done()
			for ctx.Err() == nil {
				var opt redlock.LockOption
				key := "c-rw"
				switch g % 4 {
				case 0:
					opt = redlock.WriteLock()
				case 1:
					opt = redlock.ReadLock()
				case 2:
					opt, key = redlock.Permits(2), "c-sem"
				case 3:
					opt, key = redlock.Reentrant(), "c-re"
				}
				l, err := c.Lock(ctx, key, 10*time.Second, opt)
				if err != nil {
					return // ctx ended
				}
				n.Add(1)
				switch g % 4 {
				case 0:
					if w := writers.Add(1); w != 1 || readers.Load() != 0 {
						fail("writer beside %d writers, %d readers", w-1, readers.Load())
					}
				case 1:
					readers.Add(1)
					if writers.Load() != 0 {
						fail("reader beside a writer")
					}
				case 2:
					if p := permits.Add(1); p > 2 {
						fail("%d holders of 2 permits", p)
					}
				case 3:
					if h := re.Add(1); h != 1 {
						fail("%d reentrant holders", h)
					}
					inner, err := c.TryLock(redlock.WithLock(ctx, l), key, 10*time.Second, opt)
					if err != nil && ctx.Err() == nil {
						fail("re-entry: %v", err)
					} else if err == nil {
						_ = inner.Release(context.Background())
					}
				}
				time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
				switch g % 4 {
				case 0:
					writers.Add(-1)
				case 1:
					readers.Add(-1)
				case 2:
					permits.Add(-1)
				case 3:
					re.Add(-1)
				}
				if err := l.Release(context.Background()); err != nil {
					fail("release: %v", err)
				}
			}
		}(clients[g%3], g)
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d violations, first: %s", len(bad), bad[0])
	}
	if n.Load() == 0 {
		t.Fatal("no acquisitions")
	}
	for _, c := range clients {
		c.Close()
	}
	// A refused writer's intent keeps c-rw, with no entry, for up to 4 x
	// the backoff max (400 ms) after its last attempt: then it goes too.
	deadline := time.Now().Add(2 * time.Second)
	for _, k := range []string{"c-rw", "c-re", admin.PermitKey("c-sem", 0), admin.PermitKey("c-sem", 1)} {
		for _, nd := range nodes {
			cl := nd.Client()
			for cl.Exists(context.Background(), k).Val() != 0 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if h := cl.HGetAll(context.Background(), k).Val(); cl.Exists(context.Background(), k).Val() != 0 {
				t.Errorf("%s left on %s: %v", k, nd.Addr, h)
			}
			cl.Close()
		}
	}
	t.Logf("%d acquisitions", n.Load())
}
