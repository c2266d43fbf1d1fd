package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
)

// The typed twins of TestSanityRestartDeterministic: a restart without
// persistence, with the quarantine off, lets a second holder in beside
// the first whatever the type, and each type's checker must say so.

const sanityTTL = 10 * time.Second

// restartedMajority arranges the double grant step by step on 3 nodes
// without persistence: first runs with node 2 down, so what it takes
// lives on nodes 0,1 only; node 2 comes back empty, node 1 restarts
// empty, and second runs with node 0 frozen, so it reaches nodes 1,2 and
// finds them free while first's locks are valid. It returns the records
// of both.
func restartedMajority(t *testing.T, first, second func(*redlock.Client) []Record) []Record {
	t.Helper()
	nodes := harness.Start(t, 3, harness.Config{Persist: false})
	// As in TestSanityRestartDeterministic: a node timeout that live nodes
	// meet however loaded the machine, one attempt per call, and the
	// unprotected case.
	opts := []redlock.Option{redlock.WithNodeTimeout(time.Second), redlock.WithMaxAttempts(1),
		redlock.WithRestartQuarantine(redlock.QuarantineOff)}
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
	nodes[2].Kill()
	recs := first(a)
	// a's calls may still be in flight (a TryLock returns at quorum);
	// Close waits for them before node 2 comes back empty.
	a.Close()
	if err := nodes[2].Restart(); err != nil {
		t.Fatal(err)
	}
	if err := nodes[1].Restart(); err != nil { // returns once node 1 answers, empty
		t.Fatal(err)
	}
	nodes[0].Freeze()
	defer nodes[0].Thaw() // before b.Close, which waits for b's call to node 0
	return append(recs, second(b)...)
}

// held takes key on c with TryLock and records it as held to the end of
// its validity (never released); for a permit, Key is the semaphore's.
func held(t *testing.T, ctx context.Context, c *redlock.Client, client int, key string, opt redlock.LockOption) (*redlock.Lock, Record) {
	t.Helper()
	call := Mono()
	l, err := c.TryLock(ctx, key, sanityTTL, opt)
	acq := Mono()
	if err != nil {
		t.Fatalf("client %d: lock %s: %v", client, key, err)
	}
	return l, Record{Client: client, Key: key, Kind: string(l.Kind()), Call: call, Acq: acq, RelCall: 1 << 62,
		Valid: acq + int64(time.Until(l.Deadline()))}
}

func TestSanityRestartReadWrite(t *testing.T) {
	ctx := context.Background()
	recs := restartedMajority(t, func(a *redlock.Client) []Record {
		_, r := held(t, ctx, a, 0, "rw", redlock.WriteLock())
		return []Record{r}
	}, func(b *redlock.Client) []Record {
		_, r := held(t, ctx, b, 1, "rw", redlock.ReadLock())
		return []Record{r}
	})
	n, ex := RWConflicts(recs)
	t.Logf("rw-conflicts=%d %v", n, ex)
	if n == 0 {
		t.Fatal("sanity case: a reader beside the writer after an empty restart, and RWConflicts saw none")
	}
}

func TestSanityRestartSemaphore(t *testing.T) {
	ctx := context.Background()
	const permits = 2
	recs := restartedMajority(t, func(a *redlock.Client) []Record {
		var rs []Record
		for i := 0; i < permits; i++ { // every permit, on nodes 0,1
			_, r := held(t, ctx, a, i, "sem", redlock.Permits(permits))
			rs = append(rs, r)
		}
		return rs
	}, func(b *redlock.Client) []Record {
		_, r := held(t, ctx, b, permits, "sem", redlock.Permits(permits))
		return []Record{r}
	})
	n, ex := Excess(recs, permits)
	t.Logf("excess=%d %v", n, ex)
	if n == 0 {
		t.Fatalf("sanity case: %d holders of %d permits after an empty restart, and Excess saw none", permits+1, permits)
	}
}

func TestSanityRestartReentrant(t *testing.T) {
	ctx := context.Background()
	recs := restartedMajority(t, func(a *redlock.Client) []Record {
		outer, r := held(t, ctx, a, 0, "re", redlock.Reentrant())
		_, e := held(t, redlock.WithLock(ctx, outer), a, 0, "re", redlock.Reentrant())
		r.Hold, e.Hold = outer.Owner(), outer.Owner()
		return []Record{r, e}
	}, func(b *redlock.Client) []Record {
		l, r := held(t, ctx, b, 1, "re", redlock.Reentrant())
		r.Hold = l.Owner()
		return []Record{r}
	})
	n, ex := ReentrantConflicts(recs)
	t.Logf("reentrant-conflicts=%d %v", n, ex)
	if n != 2 { // the second hold beside each entry of the first, not the entries beside each other
		t.Fatalf("sanity case: a second hold beside a hold of two entries after an empty restart, and ReentrantConflicts saw %d pairs, want 2", n)
	}
}
