package core

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/observe"
)

// A call that waits for several keys at once (LockKeys: it stands in no
// key's local queue) beside 8 workers that pass one of its keys among
// themselves in runs (the local hand-off, WithLocalHandoff run d = 5 ms):
// it gets its turn when a run ends, and the runs it waits behind are the
// short ones (d) of a waiter that is seen, as docs/handoff.md says, not
// the 40·d ones of a key no one else waits for; so it does not wait for a
// poll that happens to fall between two runs. Both when the workers are
// another process (a Client of their own) and when they share its Client.
// Counted in the workers' runs and holds during each of its waits, not in
// time: a hold lasts at least its 1 ms sleep, so a run of 40·d holds up to
// 200 of them on any machine; a run of d about 6, but the first run after
// the wait began ends only once this Client has heard of the waiter (its
// background PUBSUB NUMSUB, slower on a loaded machine), so holds are
// bounded by that one long run and a few short ones.
func TestMultiKeyWaiterBesideLocalRuns(t *testing.T) {
	for _, same := range []bool{false, true} {
		name := map[bool]string{false: "another process", true: "the same Client"}[same]
		t.Run(name, func(t *testing.T) {
			s := multiKeyBesideRuns(t, same)
			t.Logf("LockKeys: %d holds in %v, longest wait %v, at most %d runs and %d holds of the workers during one wait; the workers: %d holds in %d runs",
				s.holds, s.span, s.longest, s.mostRuns, s.mostHolds, s.workerHolds, s.runs)
			if s.mostRuns > 8 || s.mostHolds > 250 {
				t.Errorf("a wait lasted %d of the workers' runs, %d of their holds; want at most 8 runs and 250 holds (runs end for it)", s.mostRuns, s.mostHolds)
			}
			if 2*s.holds < s.runs {
				t.Errorf("%d holds beside %d runs of the workers; want one at least every other run", s.holds, s.runs)
			}
		})
	}
}

// besideRuns is what multiKeyBesideRuns saw.
type besideRuns struct {
	span, longest       time.Duration
	holds               int64 // the LockKeys caller's
	mostRuns, mostHolds int64 // the workers', during one of its waits
	runs, workerHolds   int64 // the workers', in all
}

// multiKeyBesideRuns runs 8 workers on one key with Lock (1 ms holds) and,
// for 5 s, one caller of LockKeys on that key and another, on the workers'
// Client (same) or a Client of its own.
func multiKeyBesideRuns(t *testing.T, same bool) besideRuns {
	nodes := harness.Start(t, 3, harness.Config{})
	var s besideRuns
	var runs, holds atomic.Int64 // the workers'
	a := client(t, nodes, redlock.WithObserver(func(e observe.Event) {
		if e.Op == observe.OpAcquire && e.Err == nil && !e.Passed && len(e.Keys) == 1 {
			runs.Add(1)
		}
	}))
	b := a
	if !same {
		b = client(t, nodes)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				l, err := a.Lock(ctx, "runs:k", 10*time.Second)
				if err != nil {
					return // ctx ended
				}
				time.Sleep(time.Millisecond)
				holds.Add(1)
				_ = l.Release(context.Background())
			}
		}()
	}
	s.span = 5 * time.Second
	for end := time.Now().Add(s.span); time.Now().Before(end); s.holds++ {
		start, r0, h0 := time.Now(), runs.Load(), holds.Load()
		lctx, lcancel := context.WithTimeout(ctx, time.Minute) // a hang guard
		l, err := b.LockKeys(lctx, []string{"runs:k", "runs:k2"}, 10*time.Second)
		lcancel()
		if err != nil {
			t.Fatal(err)
		}
		s.longest = max(s.longest, time.Since(start))
		s.mostRuns, s.mostHolds = max(s.mostRuns, runs.Load()-r0), max(s.mostHolds, holds.Load()-h0)
		time.Sleep(time.Millisecond)
		_ = l.Release(context.Background())
	}
	s.runs, s.workerHolds = runs.Load(), holds.Load()
	return s
}
