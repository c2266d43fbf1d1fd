package core

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
)

// A rolling migration from go-redsync: old instances (go-redsync v4) and
// new ones (this library) take one key on the same five nodes. They
// exclude each other (both write the key with SET NX and delete only their
// own value); go-redsync's locks are in no TTL register, so after two of
// the three nodes that hold a go-redsync lock restart empty, a new
// instance with default options takes the key while go-redsync's 10 s lock
// is valid (the registers show no window: the double grant, the scenario's
// sanity case) unless restart windows fall back to a setting at least as
// long as go-redsync's expiry. With default options the Client turns the
// setting floor on once it finds go-redsync's value on the nodes, and says
// so; with the setting docs/migration.md gives it is on from the start; with a
// setting shorter than go-redsync's expiry nothing can help (the double
// grant, the scenario's sanity case).
func TestMigrationFromRedsync(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []redlock.Option
		safe bool
		warn bool // the Client warns that it found a foreign value
		late bool // the new instance first tries the key after the restarts
	}{
		{"setting shorter than go-redsync's expiry: the double grant", []redlock.Option{redlock.WithRestartQuarantine(2 * time.Second)}, false, true, false},
		{"default options: floor on once go-redsync's value is seen", nil, true, true, false},
		{"default options: go-redsync's value first seen after the restarts", nil, true, true, true},
		{"setting floor", []redlock.Option{redlock.WithRestartQuarantine(15*time.Second, redlock.QuarantineSettingFloor)}, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			nodes := harness.Start(t, 5, harness.Config{})
			// go-redsync reaches nodes 3 and 4 through proxies that refuse
			// while it locks: its lock is on a bare quorum, 0, 1 and 2.
			ps, urls := proxies(t, nodes, false)
			pools := make([]rsredis.Pool, len(nodes))
			for i, u := range urls {
				opt, err := redis.ParseURL(u)
				if err != nil {
					t.Fatal(err)
				}
				opt.MaxRetries = -1
				cl := redis.NewClient(opt)
				t.Cleanup(func() { _ = cl.Close() })
				pools[i] = rsgoredis.NewPool(cl)
			}
			var buf bytes.Buffer
			var mu sync.Mutex
			logger := slog.New(slog.NewTextHandler(&syncWriter{w: &buf, mu: &mu}, nil))
			c := client(t, nodes, append(tc.opts, redlock.WithLogger(logger))...)
			warm, err := c.TryLock(ctx, "mig:warm", 2*time.Second) // knows every node's process
			if err != nil {
				t.Fatal(err)
			}
			_ = warm.Release(ctx)
			ps[3].Set(harness.Refuse)
			ps[4].Set(harness.Refuse)
			old := redsync.New(pools...).NewMutex("mig:k", redsync.WithExpiry(10*time.Second), redsync.WithTries(1))
			if err := old.LockContext(ctx); err != nil {
				t.Fatal(err)
			}
			ps[3].Heal()
			ps[4].Heal()
			until := time.Now().Add(10 * time.Second)
			if !tc.late {
				if _, err := c.TryLock(ctx, "mig:k", 2*time.Second); !errors.Is(err, redlock.ErrNotObtained) {
					t.Fatalf("new instance while go-redsync holds the key: %v, want ErrNotObtained", err)
				}
			}
			for _, n := range nodes[:2] {
				if err := n.Restart(); err != nil {
					t.Fatal(err)
				}
			}
			var got *redlock.Lock
			for end := time.Now().Add(4 * time.Second); got == nil && time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				got, _ = c.TryLock(ctx, "mig:k", 2*time.Second)
			}
			switch {
			case got != nil && tc.safe:
				t.Fatalf("a second holder with %v of go-redsync's lock left", time.Until(until).Round(time.Millisecond))
			case got == nil && !tc.safe:
				t.Fatal("no double grant without the setting: the scenario does not reach what the setting guards against")
			case got != nil:
				t.Logf("second holder with %v of go-redsync's lock left", time.Until(until).Round(time.Millisecond))
				_ = got.Release(ctx)
			}
			mu.Lock()
			warned := strings.Contains(buf.String(), "written by another library")
			mu.Unlock()
			if warned != tc.warn {
				t.Errorf("warned of the foreign value: %v, want %v", warned, tc.warn)
			}
		})
	}
}

// Old and new instances contend for one key on five nodes, each side in a
// tight loop (lock, release, lock again): 4 goroutines of go-redsync and 4
// of one new instance. go-redsync publishes nothing when it releases, so
// the new instance's waiters must poll for it and must not wait for an
// announcement that never comes. The new instance must get a fair share
// of the holds, and no two holders may overlap.
func TestMigrationFromRedsyncContention(t *testing.T) {
	const (
		workers = 4
		span    = 5 * time.Second
	)
	nodes := harness.Start(t, 5, harness.Config{})
	rs := redsync.New(redsyncPools(t, nodes)...)
	c := client(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), span)
	defer cancel()
	var inside, overlaps, news, olds atomic.Int64
	critical := func(n *atomic.Int64) {
		if inside.Add(1) != 1 {
			overlaps.Add(1)
		}
		runtime.Gosched()
		inside.Add(-1)
		n.Add(1)
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			m := rs.NewMutex("mig:contended", redsync.WithExpiry(time.Second))
			for ctx.Err() == nil {
				if m.LockContext(ctx) == nil {
					critical(&olds)
					_, _ = m.UnlockContext(context.Background())
				}
			}
		}()
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if l, err := c.Lock(ctx, "mig:contended", time.Second); err == nil {
					critical(&news)
					_ = l.Release(context.Background())
				}
			}
		}()
	}
	wg.Wait()
	n, o := news.Load(), olds.Load()
	t.Logf("holds in %v: new %d, go-redsync %d; overlaps %d", span, n, o, overlaps.Load())
	if overlaps.Load() != 0 {
		t.Fatalf("%d overlapping holds", overlaps.Load())
	}
	if 3*n < n+o {
		t.Fatalf("new instance got %d of %d holds, want at least a third", n, n+o)
	}
}

// A new instance waiting behind go-redsync holds learns of each release
// about as soon as go-redsync's own waiters would (they poll every
// 50-250 ms), although its backoff has grown long: a go-redsync lock is
// held for 2 s at a time, released, and taken again once the new
// instance has had it. The median wait from go-redsync's release to the
// new instance's lock must stay within go-redsync's longest poll.
func TestMigrationFromRedsyncWake(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	m := redsync.New(redsyncPools(t, nodes)...).NewMutex("mig:wake", redsync.WithExpiry(10*time.Second))
	c := client(t, nodes, redlock.WithRetryBackoff(2*time.Millisecond, 2*time.Second))
	ctx := context.Background()
	var waits []time.Duration
	for range 3 {
		if err := m.LockContext(ctx); err != nil {
			t.Fatal(err)
		}
		got := make(chan time.Time, 1)
		go func() {
			l, err := c.Lock(ctx, "mig:wake", time.Second)
			got <- time.Now()
			if err != nil {
				t.Error(err)
				return
			}
			_ = l.Release(ctx)
		}()
		time.Sleep(2 * time.Second)
		released := time.Now()
		if ok, err := m.UnlockContext(ctx); !ok || err != nil {
			t.Fatalf("go-redsync unlock: %v %v", ok, err)
		}
		waits = append(waits, (<-got).Sub(released))
	}
	slices.Sort(waits)
	t.Logf("waits from go-redsync's release to the new instance's lock: %v", waits)
	if med := waits[len(waits)/2]; med > 250*time.Millisecond {
		t.Fatalf("median wait %v after go-redsync's release, want at most 250ms (go-redsync's longest poll)", med)
	}
}

// redsyncPools returns a go-redsync pool per node, on clients closed at
// the test's end.
func redsyncPools(t *testing.T, nodes []*harness.Node) []rsredis.Pool {
	t.Helper()
	pools := make([]rsredis.Pool, len(nodes))
	for i, n := range nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.Addr})
		t.Cleanup(func() { _ = cl.Close() })
		pools[i] = rsgoredis.NewPool(cl)
	}
	return pools
}
