package chaos

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/observe"
)

// TestSanityWatchdogRestartDeterministic arranges, step by step, the double
// grant of sanity-watchdog-restart-no-persistence: 5 nodes without
// persistence, client A reaches nodes 0-2 and B nodes 2-4 (the static
// partition). A holds a watchdog lock past its lease; node 2 restarts
// empty, so A's renewals stop reaching a quorum (2 yes, 3 not answered: not
// extended, not known lost) while B gets the lock on nodes 2-4, after A's
// first lease and before the deadline of A's last renewal, when A's lock
// ends (Done). The Overlaps checker must report it, which it can only do
// with the renewed deadline as the end of A's interval.
func TestSanityWatchdogRestartDeterministic(t *testing.T) {
	c := procCluster(t, 5, false)
	defer Partition(c)()
	// A 3 s lease renewed every 250 ms: B's acquisition must come within
	// the validity A's last renewal left (2.7 s at least), whatever the
	// load; the node timeout is capped at a tenth of the lease.
	const lease, every = 3 * time.Second, 250 * time.Millisecond
	var renewals atomic.Int64
	opts := []redlock.Option{redlock.WithNodeTimeout(time.Second), redlock.WithWatchdog(lease, every), redlock.WithRestartQuarantine(redlock.QuarantineOff),
		redlock.WithObserver(func(e observe.Event) {
			if e.Op == "renew" && e.Err == nil {
				renewals.Add(1)
			}
		})}
	a, err := harness.NewClient(t, c.URLs(0), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx := context.Background()
	call := Mono()
	la, err := a.TryLock(ctx, "k", redlock.Watchdog)
	if err != nil {
		t.Fatalf("A: %v", err)
	}
	recA := Record{Client: 0, Key: "k", Call: call, Acq: Mono()}
	// Hold past the first lease: only the renewals keep the lock.
	past := time.NewTimer(time.Duration(recA.Acq+int64(lease)-Mono()) + 10*time.Millisecond)
	defer past.Stop()
	select {
	case <-past.C:
	case <-la.Done():
		t.Fatalf("A lost its lock before the end of its lease: %v", la.Err())
	}
	if renewals.Load() == 0 {
		t.Fatal("A's lock outlived its lease without a renewal")
	}
	if err := c.Nodes[2].Restart(); err != nil { // returns once node 2 answers, empty
		t.Fatal(err)
	}
	// B is made after the restart: no stale connection to node 2.
	b, err := harness.NewClient(t, c.URLs(1), redlock.WithNodeTimeout(time.Second), redlock.WithRestartQuarantine(redlock.QuarantineOff))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	bctx, cancel := context.WithTimeout(ctx, lease)
	call = Mono()
	lb, err := b.Lock(bctx, "k", 10*time.Second)
	acq := Mono()
	cancel()
	if err != nil {
		t.Fatalf("B did not get the lock after the empty restart: %v", err)
	}
	recB := Record{Client: 1, Key: "k", Call: call, Acq: acq, RelCall: 1 << 62,
		Valid: acq + int64(time.Until(lb.Deadline()))}
	// A learns nothing from its renewals (B's nodes are out of its reach):
	// it still holds the lock as far as it can tell, until its deadline.
	held := la.Err()
	<-la.Done()
	recA.RelCall = Mono()
	_ = la.Release(ctx)
	recA.RelRet = Mono()
	recA.Valid = Mono() + int64(time.Until(la.Deadline())) // ended: no longer moves
	t.Logf("A: %d renewals, held %v past its first lease; when B had the lock, A's Err: %v; at the end: %v", renewals.Load(),
		time.Duration(recA.End()-recA.Acq-int64(lease)), held, la.Err())
	if recB.Acq < recA.Acq+int64(lease) {
		t.Fatalf("B got the lock %v after A, within A's first lease", time.Duration(recB.Acq-recA.Acq))
	}
	n, msgs := Overlaps([]Record{recA, recB})
	t.Logf("overlaps=%d %v", n, msgs)
	if n == 0 {
		t.Fatal("sanity case: a restart without persistence under a watchdog lock showed no overlap")
	}
}
