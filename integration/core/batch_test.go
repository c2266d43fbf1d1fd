package core

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/observe"
)

// The watchdog renews a Client's locks in batches: one pipelined call per
// node per tick, each script call covering up to node.ManyPerScript locks,
// not one script per lock; none of the locks is lost on the way. The
// verdict counts calls and renewals, not time: whatever the machine's
// speed, L locks renewed per tick cost ceil(L/ManyPerScript) script calls
// per node, where one call per lock would cost L.
func TestWatchdogRenewsInBatches(t *testing.T) {
	const locks = 3*node.ManyPerScript - 10 // three script calls per node per tick
	ev := newEvents()
	c, nodes := setup(t, 3, redlock.WithWatchdog(4*time.Second, 500*time.Millisecond), redlock.WithObserver(ev.observe))
	held := make([]*redlock.Lock, locks)
	var wg sync.WaitGroup
	errs := make(chan error, locks)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for j := w; j < locks; j += 8 {
				l, err := c.TryLock(context.Background(), fmt.Sprintf("batch-%d", j), redlock.Watchdog)
				if err != nil {
					errs <- err
					return
				}
				held[j] = l
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	base := len(ev.waitFor(t, 0, renewedOK))
	before := make([]int, len(nodes))
	for i, nd := range nodes {
		before[i] = scriptCalls(t, nd)
	}
	ev.waitFor(t, base+3*locks, renewedOK) // three ticks' worth
	for i, nd := range nodes {
		calls := scriptCalls(t, nd) - before[i]
		// Renewals counted after the calls were read: calls <= what the
		// renewals so far needed. Batched, R renewals need R/ManyPerScript
		// calls and a partly filled call per batch; allow twice that.
		r := len(ev.waitFor(t, 0, renewedOK)) - base
		if limit := 2 * (r/node.ManyPerScript + 1); calls > limit {
			t.Errorf("node %d: %d script calls for %d renewals of %d locks: want at most %d (batched)", i, calls, r, locks, limit)
		}
	}
	for _, e := range ev.waitFor(t, 0, func(e observe.Event) bool { return e.Op == "renew" && e.Err != nil || e.Op == "lost" }) {
		t.Errorf("%s %v: %v", e.Op, e.Keys, e.Err)
	}
	for _, l := range held {
		if err := l.Err(); err != nil {
			t.Fatalf("%s: %v", l.Key(), err)
		}
		if err := l.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
