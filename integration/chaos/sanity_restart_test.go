package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
)

// TestSanityRestartDeterministic arranges the restart-without-persistence
// double grant step by step: 3 nodes, A holds on nodes 0,1 (node 2 down),
// node 1 restarts empty, B acquires on nodes 1,2 (node 0 frozen) while A's
// validity has not ended. The Overlaps checker must report it.
func TestSanityRestartDeterministic(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{Persist: false})
	ctx := context.Background()
	// A generous node timeout: the live nodes (B's just restarted, with
	// fresh connections) answer inside it however loaded the machine; a
	// frozen or dead node's call does not hold up a round decided without
	// it.
	opts := []redlock.Option{redlock.WithNodeTimeout(time.Second), redlock.WithMaxAttempts(1),
		redlock.WithRestartQuarantine(redlock.QuarantineOff)} // the unprotected case
	a, err := harness.NewClient(t, harness.URLs(nodes), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := harness.NewClient(t, harness.URLs(nodes), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const ttl = 10 * time.Second
	nodes[2].Kill() // A reaches only nodes 0,1
	call := Mono()
	la, err := a.TryLock(ctx, "k", ttl)
	acq := Mono()
	if err != nil {
		t.Fatalf("A: %v", err)
	}
	// A's call to node 2 may still be in flight (TryLock returned at
	// quorum); Close waits for it to end before node 2 comes back empty.
	a.Close()
	if err := nodes[2].Restart(); err != nil {
		t.Fatal(err)
	}
	recA := Record{Client: 0, Key: "k", Call: call, Acq: acq, RelCall: 1 << 62,
		Valid: acq + int64(time.Until(la.Deadline()))}
	if err := nodes[1].Restart(); err != nil { // returns once node 1 answers, empty
		t.Fatal(err)
	}
	for i, nd := range nodes {
		t.Logf("node %d %s", i, nd.Addr)
	}
	nodes[0].Freeze()
	call = Mono()
	lb, err := b.TryLock(ctx, "k", ttl)
	acq = Mono()
	nodes[0].Thaw()
	if err != nil {
		t.Fatalf("B did not get the lock after the empty restart: %v", err)
	}
	recB := Record{Client: 1, Key: "k", Call: call, Acq: acq, RelCall: 1 << 62,
		Valid: acq + int64(time.Until(lb.Deadline()))}
	n, msgs := Overlaps([]Record{recA, recB})
	t.Logf("overlaps=%d %v", n, msgs)
	if n == 0 {
		t.Fatal("sanity case: restart without persistence showed no overlap")
	}
}
