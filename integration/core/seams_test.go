package core

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/admin"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/observe"
)

// Tests of the places where a lock type meets the core: names that look
// like a typed lock's metadata, a writer's intent outliving its readers,
// plain calls on typed keys, the fair waiter's place, a call that could
// only wait for itself, and Run's loss signal.

// Owner values and a typed lock's metadata cannot collide, whatever name
// a Client is given: a name beginning with '#' (which the metadata fields
// do) still excludes.
func TestMetadataLookingNames(t *testing.T) {
	nodes := harness.Start(t, 5, harness.Config{})
	ctx := context.Background()
	for _, name := range []string{"#blue", "#kind", "#intent", "#", "#holder/x"} {
		a := client(t, nodes, redlock.WithName(name))
		b := client(t, nodes, redlock.WithName("#"+name))
		for _, tc := range []struct {
			kind        string
			first, then redlock.LockOption
		}{
			{"writer+writer", redlock.WriteLock(), redlock.WriteLock()},
			{"writer+reader", redlock.WriteLock(), redlock.ReadLock()},
			{"reader+writer", redlock.ReadLock(), redlock.WriteLock()},
			{"reentrant", redlock.Reentrant(), redlock.Reentrant()},
		} {
			key := "meta:" + name + ":" + tc.kind
			l, err := a.TryLock(ctx, key, 10*time.Second, tc.first)
			if err != nil {
				t.Fatalf("%s %s: first: %v", name, tc.kind, err)
			}
			if l.Remaining() <= 0 {
				t.Fatalf("%s %s: no validity", name, tc.kind)
			}
			if _, err := b.TryLock(ctx, key, 10*time.Second, tc.then); !errors.Is(err, redlock.ErrNotObtained) {
				t.Fatalf("name %q, %s: a second holder got in beside the first (err %v)", name, tc.kind, err)
			}
			hs := hashes(t, nodes, key)
			if n := countNodes(hs, func(h map[string]string) bool { _, ok := h[l.Owner()]; return ok }); n < 3 {
				t.Fatalf("name %q, %s: the holder's entry is on %d of 5 nodes: %v", name, tc.kind, n, hs)
			}
			// With the key gone from every node, Extend must fail.
			for _, n := range nodes {
				cl := n.Client()
				cl.Del(ctx, key)
				cl.Close()
			}
			if err := l.Extend(ctx, 10*time.Second); !errors.Is(err, redlock.ErrLockLost) {
				t.Fatalf("name %q, %s: Extend of a key on no node: %v, want ErrLockLost", name, tc.kind, err)
			}
			_ = l.Release(ctx)
		}
	}
}

// Under continuous readers, a writer that was refused keeps new readers
// out until it gets in (its intent is renewed by each attempt and must not
// go with the last reader's entry): no reader's winning attempt starts
// after the writer's first refusal reached a quorum.
func TestWriterNotStarvedByContinuousReaders(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const key, rttl = "starve", 10 * time.Second
	var wmu sync.Mutex
	var firstAnswers []time.Time // the writer's node answers to its first round
	var asking atomic.Bool
	w := client(t, nodes, redlock.WithNodeObserver(func(e observe.NodeEvent) {
		if e.Op == observe.OpAcquire && asking.Load() {
			wmu.Lock()
			firstAnswers = append(firstAnswers, time.Now())
			wmu.Unlock()
		}
	}))
	type win struct{ start time.Time }
	var rmu sync.Mutex
	var wins []win
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := 0; c < 3; c++ {
		rc := client(t, nodes)
		for g := 0; g < 2; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					l, err := rc.Lock(ctx, key, rttl, redlock.ReadLock())
					if err != nil {
						return
					}
					// The winning attempt started deadline - (ttl - drift budget) ago.
					start := l.Deadline().Add(-(rttl - admin.DriftBudget(rttl, admin.DefaultDriftFactor)))
					rmu.Lock()
					wins = append(wins, win{start})
					rmu.Unlock()
					time.Sleep(150*time.Millisecond + time.Duration((g*50+i*37)%150)*time.Millisecond)
					_ = l.Release(ctx)
				}
			}(g)
		}
	}
	defer func() { close(stop); cancel(); wg.Wait() }()
	for round := 0; round < 4; round++ {
		time.Sleep(400 * time.Millisecond) // readers overlap again
		wmu.Lock()
		firstAnswers = nil
		wmu.Unlock()
		asking.Store(true)
		l, err := w.Lock(ctx, key, rttl, redlock.WriteLock())
		asking.Store(false)
		if err != nil {
			t.Fatalf("writer: %v", err)
		}
		got := time.Now()
		wmu.Lock()
		ans := append([]time.Time(nil), firstAnswers...)
		wmu.Unlock()
		if len(ans) < 2 {
			_ = l.Release(ctx)
			continue // got in on its first round: nothing to refuse
		}
		refused := ans[1] // a quorum (2 of 3) of its first round had answered: intent on a quorum
		rmu.Lock()
		late := 0
		for _, r := range wins {
			if r.start.After(refused.Add(time.Millisecond)) && r.start.Before(got) {
				late++
			}
		}
		rmu.Unlock()
		if late > 0 {
			t.Errorf("round %d: %d readers started a winning attempt after the writer was refused (writer waited %v)", round, late, got.Sub(refused))
		}
		time.Sleep(50 * time.Millisecond)
		_ = l.Release(ctx)
	}
}

// A plain lock treats a key held as a typed lock as held, on every path:
// Lock and TryLock, LockKeys with other keys, with fencing, and through
// go-redis clients that keep their retries (another acquisition script).
// It waits (or fails with ErrNotObtained), never ErrWrongType; and once
// the typed lock is gone, the waiting plain lock gets it.
func TestPlainCallsOnTypedKeyWait(t *testing.T) {
	c, nodes := setup(t, 3)
	var cls []redis.UniversalClient
	for _, n := range nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.Addr, ContextTimeoutEnabled: true}) // default retries
		t.Cleanup(func() { cl.Close() })
		cls = append(cls, cl)
	}
	retrying, err := redlock.New(cls, redlock.WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { retrying.Close() })
	ctx := context.Background()
	typed, err := c.TryLock(ctx, "tk", 10*time.Second, redlock.ReadLock())
	if err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		name string
		call func(ctx context.Context) (*redlock.Lock, error)
	}{
		{"TryLock", func(ctx context.Context) (*redlock.Lock, error) { return c.TryLock(ctx, "tk", time.Second) }},
		{"Lock", func(ctx context.Context) (*redlock.Lock, error) { return c.Lock(ctx, "tk", time.Second) }},
		{"LockKeys", func(ctx context.Context) (*redlock.Lock, error) {
			return c.LockKeys(ctx, []string{"tk", "other"}, time.Second)
		}},
		{"TryLockKeys", func(ctx context.Context) (*redlock.Lock, error) {
			return c.TryLockKeys(ctx, []string{"other", "tk"}, time.Second)
		}},
		{"fenced", func(ctx context.Context) (*redlock.Lock, error) {
			return c.Lock(ctx, "tk", time.Second, redlock.WithFencing())
		}},
		{"retrying client", func(ctx context.Context) (*redlock.Lock, error) { return retrying.Lock(ctx, "tk", time.Second) }},
		{"retrying client, keys", func(ctx context.Context) (*redlock.Lock, error) {
			return retrying.LockKeys(ctx, []string{"tk", "other"}, time.Second)
		}},
		{"Permits", func(ctx context.Context) (*redlock.Lock, error) {
			return c.TryLock(ctx, "tk", time.Second, redlock.Permits(2)) // other keys: no conflict expected
		}},
	}
	for _, tc := range calls {
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		l, err := tc.call(cctx)
		cancel()
		if tc.name == "Permits" { // its keys are the permits', not tk: it gets one
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			_ = l.Release(ctx)
			continue
		}
		if errors.Is(err, redlock.ErrWrongType) || !errors.Is(err, redlock.ErrNotObtained) {
			t.Errorf("%s on a typed key: %v, want ErrNotObtained (held), not ErrWrongType", tc.name, err)
		}
		if l != nil {
			t.Errorf("%s on a typed key got a lock", tc.name)
			_ = l.Release(ctx)
		}
	}
	// A waiting plain Lock gets the key once the typed lock is released.
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		l, err := retrying.LockKeys(wctx, []string{"tk", "other"}, 5*time.Second)
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(200 * time.Millisecond)
	if err := typed.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("plain LockKeys after the typed lock went: %v", err)
	}
}

// A fair waiter's place on the nodes lasts FairWaiterTimeout, whatever
// its retry backoff: a waiter that dies delays the next by at most that
// (plus one retry of the next waiter, at most FairWaiterTimeout/10).
func TestFairPlaceBoundedWhateverTheBackoff(t *testing.T) {
	c, nodes := setup(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h, err := c.Lock(ctx, "fp", 30*time.Second, redlock.Fair())
	if err != nil {
		t.Fatal(err)
	}
	w := client(t, nodes)
	slow := redlock.WithRetryBackoff(2*time.Millisecond, 2*time.Second)
	got := make(chan error, 1)
	go func() {
		l, err := w.Lock(ctx, "fp", 10*time.Second, redlock.Fair(), slow)
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	queuedUntil(t, nodes, "fp", 1)
	for round := 0; round < 3; round++ { // read it again as the waiter renews it
		for _, n := range nodes {
			cl := n.Client()
			now, err := cl.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			places, err := cl.ZRangeWithScores(ctx, "{fp}:fair:places", 0, -1).Result()
			cl.Close()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range places {
				left := time.Duration(int64(p.Score)-now.UnixMilli()) * time.Millisecond
				if left > admin.FairWaiterTimeout {
					t.Fatalf("a place lasts %v on %s, more than FairWaiterTimeout (%v)", left, n.Addr, admin.FairWaiterTimeout)
				}
			}
		}
		time.Sleep(400 * time.Millisecond)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}

	// Behind a dead waiter's place (as it left it), a waiter with a 2 s
	// backoff max gets the key within FairWaiterTimeout + one capped retry.
	for _, n := range nodes {
		cl := n.Client()
		now, err := cl.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		cl.Set(ctx, "{fd}:fair:ticket", 1, time.Minute)
		cl.ZAdd(ctx, "{fd}:fair:queue", redisZ(1, "dead-waiter"))
		cl.ZAdd(ctx, "{fd}:fair:places", redisZ(float64(now.Add(admin.FairWaiterTimeout).UnixMilli()), "dead-waiter"))
		cl.Close()
	}
	start := time.Now()
	l, err := w.Lock(ctx, "fd", 10*time.Second, redlock.Fair(), slow)
	if err != nil {
		t.Fatal(err)
	}
	waited := time.Since(start)
	_ = l.Release(ctx)
	// The bound, with a second of slack for a loaded machine.
	if bound := admin.FairWaiterTimeout + admin.FairWaiterTimeout/10 + time.Second; waited > bound {
		t.Fatalf("behind a dead waiter for %v, more than %v", waited, bound)
	}
	t.Logf("behind a dead waiter for %v", waited)
}

// A call that could only wait for a lock its own ctx carries is refused
// at once: a second permit of a semaphore of one.
func TestOnlyPermitAskedAgain(t *testing.T) {
	c, _ := setup(t, 3)
	ctx := context.Background()
	p, err := c.Lock(ctx, "one", 10*time.Second, redlock.Permits(1))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(ctx)
	wctx, cancel := context.WithTimeout(redlock.WithLock(ctx, p), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err = c.Lock(wctx, "one", time.Second, redlock.Permits(1))
	if !errors.Is(err, redlock.ErrHeldByCaller) {
		t.Fatalf("the only permit asked again: %v after %v, want ErrHeldByCaller", err, time.Since(start))
	}
	// With two permits the second one is there to take.
	q, err := c.Lock(ctx, "two", 10*time.Second, redlock.Permits(2))
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Lock(redlock.WithLock(ctx, q), "two", 10*time.Second, redlock.Permits(2))
	if err != nil {
		t.Fatalf("second of two permits: %v", err)
	}
	_ = r.Release(ctx)
	_ = q.Release(ctx)
}

// When Run's lock is lost, fn's ctx is already done by the time the loss
// can be observed (Done closed).
func TestRunCtxDoneWithTheLoss(t *testing.T) {
	c, nodes := setup(t, 3, redlock.WithWatchdog(300*time.Millisecond, 100*time.Millisecond))
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		key := "runloss"
		err := c.Run(ctx, key, func(ctx context.Context) error {
			l := redlock.LockFrom(ctx)
			for _, n := range nodes { // the key vanishes: the next renewal finds it lost
				cl := n.Client()
				cl.Del(ctx, key)
				cl.Close()
			}
			<-l.Done()
			if ctx.Err() == nil {
				return errors.New("fn's ctx not done when the Lock's Done closed")
			}
			if !errors.Is(context.Cause(ctx), redlock.ErrLockLost) {
				return errors.New("fn's ctx cause is not the loss")
			}
			return nil
		})
		if !errors.Is(err, redlock.ErrLockLost) {
			t.Fatalf("Run: %v, want the loss", err)
		}
		if strings.Contains(err.Error(), "not done when") || strings.Contains(err.Error(), "cause is not") {
			t.Fatalf("run %d: %v", i, err)
		}
	}
}
