package core

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
)

// Readers of one Client queued on a key held by a writer all hold it
// together once the writer leaves, and get there in a few rounds, not one
// round per reader: the first reader in admits the others at once. Every
// node is 100 ms away (each way), so rounds, not the machine's speed,
// decide the time.
func TestLocalReadersHoldTogether(t *testing.T) {
	const readers = 6
	nodes := harness.Start(t, 3, harness.Config{})
	ps, urls := proxies(t, nodes, false)
	c, err := harness.NewClient(t, urls, redlock.WithNodeTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	w := client(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Warm up: a connection to each node per reader, and the scripts.
	var warm sync.WaitGroup
	for i := 0; i < readers; i++ {
		warm.Add(1)
		go func() {
			defer warm.Done()
			if l, err := c.Lock(ctx, "warm", 10*time.Second, redlock.ReadLock()); err == nil {
				time.Sleep(50 * time.Millisecond)
				_ = l.Release(ctx)
			}
		}()
	}
	warm.Wait()
	for _, p := range ps {
		p.SetLatency(100 * time.Millisecond)
	}
	st := time.Now()
	l, err := c.TryLock(ctx, "rtt", 10*time.Second, redlock.ReadLock())
	if err != nil {
		t.Fatal(err)
	}
	round := time.Since(st)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}

	wl, err := w.Lock(ctx, "rw", 10*time.Second, redlock.WriteLock())
	if err != nil {
		t.Fatal(err)
	}
	var holding atomic.Int32
	all := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for i := 0; i < readers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Lock(ctx, "rw", 10*time.Second, redlock.ReadLock())
			if err != nil {
				errs <- err
				return
			}
			if holding.Add(1) == readers {
				close(all)
			}
			<-all // nobody releases before every reader holds
			errs <- l.Release(ctx)
		}()
	}
	waitUntil(t, "every reader queued", func() bool { return c.Stats().Handoff.Waiting >= readers })
	released := time.Now()
	if err := wl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-all:
	case <-ctx.Done():
		t.Fatalf("only %d of %d readers hold the key together", holding.Load(), readers)
	}
	took := time.Since(released)
	wg.Wait()
	for i := 0; i < readers; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d readers all held %v after the writer left (a round: %v)", readers, took, round)
	// The notification reaches the head, the head gets in, the others get
	// in beside it: about 3 rounds; one after the other would be 7 (the limit, 6, leaves a loaded machine room).
	if limit := 6 * round; took > limit {
		t.Fatalf("%d readers all held %v after the writer left, over %v (6 rounds of %v): they got in one after the other",
			readers, took, limit, round)
	}
}

// A writer is not starved by readers that hold the key without a break:
// whether it waits in the same Client's queue as the readers or in
// another process, it gets in while each reader makes a bounded number of
// cycles.
func TestWriterNotStarvedByReaders(t *testing.T) {
	const readers = 6
	c, nodes := setup(t, 3)
	other := client(t, nodes)
	for name, wc := range map[string]*redlock.Client{"same Client": c, "other Client": other} {
		t.Run(name, func(t *testing.T) {
			key := "rw:" + name
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var reads [readers]atomic.Int32
			var wg sync.WaitGroup
			for i := 0; i < readers; i++ {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					for ctx.Err() == nil {
						l, err := c.Lock(ctx, key, 10*time.Second, redlock.ReadLock())
						if err != nil {
							continue
						}
						reads[i].Add(1)
						time.Sleep(5 * time.Millisecond)
						_ = l.Release(context.Background())
					}
				}(i)
			}
			defer wg.Wait()
			defer cancel()
			waitUntil(t, "readers going", func() bool { return reads[readers-1].Load() >= 3 })
			var before [readers]int32
			for i := range reads {
				before[i] = reads[i].Load()
			}
			wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
			defer wcancel()
			l, err := wc.Lock(wctx, key, 10*time.Second, redlock.WriteLock())
			if err != nil {
				t.Fatalf("writer: %v", err)
			}
			for i := range reads {
				if n := reads[i].Load() - before[i]; n > 3 {
					t.Errorf("reader %d got in %d times while the writer waited, want at most 3", i, n)
				}
			}
			if err := l.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A writer that got in on a quorum while a reader still held the key on
// another node left its intent there; its release clears that intent, so
// readers do not wait it out. Another writer's intent, still waiting,
// stays.
func TestWriterReleaseClearsItsIntent(t *testing.T) {
	c, nodes := setup(t, 3)
	other := client(t, nodes)
	ctx := context.Background()
	// A reader's entry on node 0 only, as one that has not left there yet.
	n0 := nodes[0].Client()
	defer n0.Close()
	now, err := n0.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	exp := now.Add(time.Minute).UnixMilli()
	if err := n0.HSet(ctx, "rw", "#kind", "rw", "#mode", "r", "x:reader", exp).Err(); err != nil {
		t.Fatal(err)
	}
	// A long intent: what is checked does not depend on the machine's speed.
	slow := redlock.WithRetryBackoff(time.Millisecond, 10*time.Second)
	wl, err := c.TryLock(ctx, "rw", 10*time.Second, redlock.WriteLock(), slow)
	if err != nil {
		t.Fatalf("writer on nodes 1 and 2: %v", err)
	}
	if h := hashes(t, nodes, "rw"); h[0]["#intent"] == "" {
		t.Fatalf("node 0 after the refusal: %v, want the writer's intent", h[0])
	}
	if err := wl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if h := hashes(t, nodes, "rw"); h[0]["#intent"] != "" || h[0]["x:reader"] == "" {
		t.Fatalf("node 0 after the writer's release: %v, want the reader without the intent", h[0])
	}

	// Another writer, refused on node 0 and waiting, keeps its intent.
	wl, err = c.TryLock(ctx, "rw", 10*time.Second, redlock.WriteLock(), slow)
	if err != nil {
		t.Fatal(err)
	}
	_, err = other.TryLock(ctx, "rw", 10*time.Second, redlock.WriteLock(), slow)
	mustErr(t, err, redlock.ErrNotObtained)
	if err := wl.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if h := hashes(t, nodes, "rw"); h[0]["#intent"] == "" {
		t.Fatalf("node 0: %v, want the waiting writer's intent", h[0])
	}
}
