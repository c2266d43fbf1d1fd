package chaos

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe"
)

// The typed workload: each client, in a loop, picks one of Spec.Keys and
// takes a reader or a writer of its read-write lock, a permit of its
// semaphore (Spec.Permits), or a reentrant hold with one or two
// re-entries. Every Lock it gets, each entry of a hold included, is one
// Record: [Lock returned, min(Release called, deadline)], the deadline
// being Remaining() read when Lock returned, as for plain locks.

// Lock keys of a typed workload's base key, one per type (a key holds
// one type of lock).
func rwKey(base string) string        { return base + ":rw" }
func semaphoreKey(base string) string { return base + ":sem" }
func reentrantKey(base string) string { return base + ":re" }

// runTyped is Run for a typed spec, with lc built from it.
func runTyped(ctx context.Context, s Spec, lc *redlock.Client, rng *mrand.Rand) ([]Record, error) {
	var recs []Record
	for ctx.Err() == nil {
		base := s.Keys[rng.IntN(len(s.Keys))]
		var rs []Record
		var err error
		// Readers outnumber writers, so that they overlap each other and
		// a writer has readers to wait for.
		switch p := rng.IntN(10); {
		case p < 3:
			rs, err = holdOnce(ctx, s, lc, rwKey(base), rng, redlock.ReadLock())
		case p < 5:
			rs, err = holdOnce(ctx, s, lc, rwKey(base), rng, redlock.WriteLock())
		case p < 8:
			rs, err = holdOnce(ctx, s, lc, semaphoreKey(base), rng, redlock.Permits(s.Permits))
		default:
			rs, err = holdReentrant(ctx, s, lc, reentrantKey(base), rng)
		}
		recs = append(recs, rs...)
		if err != nil {
			return recs, err
		}
	}
	return recs, nil
}

// fatalTyped keeps the errors that end the typed workload: fatal's, and a
// type mismatch or a refused call, which are the workload's fault, not the
// nemesis's.
func fatalTyped(err error) error {
	for _, e := range []error{redlock.ErrInvalidArgument, redlock.ErrClosed, redlock.ErrWrongType, redlock.ErrHeldByCaller} {
		if errors.Is(err, e) {
			return err
		}
	}
	return nil
}

// take calls Lock (TryLock when try: a re-entry is one attempt anyway)
// and starts the Record of the Lock it returns.
func take(ctx context.Context, s Spec, lc *redlock.Client, key string, try bool, opt redlock.LockOption) (*redlock.Lock, Record, error) {
	r := Record{Client: s.Client, Key: key, Call: Mono()}
	actx, cancel := context.WithTimeout(ctx, 2*s.TTL)
	defer cancel()
	call := lc.Lock
	if try {
		call = lc.TryLock
	}
	l, err := call(actx, key, s.TTL, opt)
	if err != nil {
		return nil, r, err
	}
	r.Acq = Mono()
	r.Valid = r.Acq + int64(l.Remaining())
	r.Kind = string(l.Kind())
	return l, r, nil
}

// release ends r's interval at the Release call.
func release(l *redlock.Lock, r *Record) {
	r.RelCall = Mono()
	_ = l.Release(context.Background())
	r.RelRet = Mono()
}

// pause is a random critical section of up to s.Hold.
func pause(s Spec, rng *mrand.Rand) {
	if s.Hold > 0 {
		time.Sleep(time.Duration(rng.Int64N(int64(s.Hold))))
	}
}

// holdOnce takes one reader, writer or permit, holds it and releases it.
func holdOnce(ctx context.Context, s Spec, lc *redlock.Client, key string, rng *mrand.Rand, opt redlock.LockOption) ([]Record, error) {
	l, r, err := take(ctx, s, lc, key, false, opt)
	if err != nil {
		return nil, fatalTyped(err)
	}
	pause(s, rng)
	release(l, &r)
	return []Record{r}, nil
}

// holdReentrant takes a hold, enters it once or twice and releases the
// entries in random order with a pause before each, so that the hold
// sometimes outlives its first entry.
func holdReentrant(ctx context.Context, s Spec, lc *redlock.Client, key string, rng *mrand.Rand) ([]Record, error) {
	outer, r, err := take(ctx, s, lc, key, false, redlock.Reentrant())
	if err != nil {
		return nil, fatalTyped(err)
	}
	r.Hold = outer.Owner()
	locks, recs := []*redlock.Lock{outer}, []Record{r}
	// Every entry is taken before any is released: a call whose ctx
	// carries a released Lock takes a hold of its own.
	in := redlock.WithLock(ctx, outer)
	var ferr error
	for i := 1 + rng.IntN(2); i > 0 && ferr == nil; i-- {
		pause(s, rng)
		l, e, err := take(in, s, lc, key, true, redlock.Reentrant())
		if err != nil {
			ferr = fatalTyped(err) // else a fault, or the hold lost: entering it fails
			continue
		}
		e.Hold = r.Hold
		locks, recs = append(locks, l), append(recs, e)
	}
	for _, i := range rng.Perm(len(locks)) {
		pause(s, rng)
		release(locks[i], &recs[i])
	}
	return recs, ferr
}

// TypedResult is what a typed scenario found.
type TypedResult struct {
	Scenario   string
	Seed       uint64
	Kinds      map[string]int // acquisitions (entries) by kind
	Holds      int            // reentrant holds (first entries)
	Reentries  int            // entries into a held hold
	MaxReaders int            // most readers of a key at once
	MaxPermits int            // most permit holders of a semaphore at once
	RW         int            // RWConflicts
	Excess     int            // Excess
	Reentrant  int            // ReentrantConflicts
	Examples   []string
	Faults     int
	FaultKinds string
	Elapsed    time.Duration
}

// Acquisitions is the number of Locks obtained, of every kind.
func (r TypedResult) Acquisitions() int {
	n := 0
	for _, v := range r.Kinds {
		n += v
	}
	return n
}

// Violations is the sum of the typed checkers' counts.
func (r TypedResult) Violations() int { return r.RW + r.Excess + r.Reentrant }

func (r TypedResult) String() string {
	return fmt.Sprintf("%s: seed %d acquisitions %d (read %d write %d permit %d reentrant %d: %d holds, %d re-entries) "+
		"max readers %d max permit holders %d rw-conflicts %d excess %d reentrant-conflicts %d faults %d (%s) in %v",
		r.Scenario, r.Seed, r.Acquisitions(), r.Kinds[string(observe.KindRead)], r.Kinds[string(observe.KindWrite)],
		r.Kinds[string(observe.KindSemaphore)], r.Kinds[string(observe.KindReentrant)], r.Holds, r.Reentries,
		r.MaxReaders, r.MaxPermits, r.RW, r.Excess, r.Reentrant, r.Faults, r.FaultKinds, r.Elapsed.Round(time.Millisecond))
}

// ExecuteTyped runs the typed workload of s (s.Permits permits per
// semaphore) on cluster c beside the nemesis and checks its records.
func ExecuteTyped(ctx context.Context, s Scenario, c *Cluster, seed uint64, helper []string, logf func(string, ...any)) (TypedResult, error) {
	res := TypedResult{Scenario: s.Name, Seed: seed, Kinds: map[string]int{}}
	began := time.Now()
	keys := make([]string, s.Keys)
	for i := range keys {
		keys[i] = fmt.Sprintf("chaos:%s:%d:k%d", s.Name, seed, i)
	}
	spec := func(i int) Spec {
		return Spec{Client: i, Nodes: c.URLs(i % 2), Counter: c.Counter, Keys: keys, TTL: s.TTL, Hold: s.Hold,
			Duration: s.Duration, Seed: seed, Quarantine: s.Quarantine, Typed: true, Permits: s.Permits}
	}
	recs, n, kinds, errs := drive(ctx, s, c, seed, helper, logf, spec)
	res.Faults, res.FaultKinds = n, summarize(kinds)
	if s.Static != "" {
		res.FaultKinds = strings.TrimPrefix(res.FaultKinds+" static-"+s.Static, "- ")
	}
	holds := map[string]bool{}
	for _, r := range recs {
		res.Kinds[r.Kind]++
		if r.Kind == string(observe.KindReentrant) {
			holds[r.Hold] = true
		}
	}
	res.Holds = len(holds)
	res.Reentries = res.Kinds[string(observe.KindReentrant)] - res.Holds
	res.MaxReaders = most(recs, kindRead)
	res.MaxPermits = most(recs, kindSemaphore)
	var ex []string
	res.RW, ex = RWConflicts(recs)
	res.Examples = append(res.Examples, ex...)
	res.Excess, ex = Excess(recs, s.Permits)
	res.Examples = append(res.Examples, ex...)
	res.Reentrant, ex = ReentrantConflicts(recs)
	res.Examples = append(res.Examples, ex...)
	res.Elapsed = time.Since(began)
	if len(errs) > 0 {
		return res, fmt.Errorf("%s: %v", s.Name, errs)
	}
	return res, nil
}

// most is the largest number of kind's intervals of one key open at once:
// whether the run made readers meet and filled the permits.
func most(recs []Record, kind string) int {
	m := 0
	sweep(only(recs, func(r Record) bool { return r.Kind == kind }), func(open []Record, _ Record) {
		m = max(m, len(open)+1)
	})
	return m
}

// Verdict says whether the run is as promised: some acquisition checked
// and no violation.
func (r TypedResult) Verdict() string {
	switch {
	case r.Acquisitions() == 0:
		return "FAIL: no acquisitions (nothing checked)"
	case r.Violations() > 0:
		return "FAIL: violations"
	}
	return "ok"
}

// TypesTable renders typed results as a Markdown table ("" for none).
func TypesTable(rs []TypedResult) string {
	if len(rs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nTyped scenarios: read-write locks, semaphores and reentrant holds\n\n")
	b.WriteString("| scenario | seed | read / write / permit / reentrant acquisitions | reentrant holds / re-entries | most readers / permit holders at once | rw conflicts | excess permits | reentrant conflicts | faults injected | verdict |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %d | %d / %d / %d / %d | %d / %d | %d / %d | %d | %d | %d | %d: %s | %s |\n",
			r.Scenario, r.Seed, r.Kinds[kindRead], r.Kinds[kindWrite], r.Kinds[kindSemaphore], r.Kinds[kindReentrant],
			r.Holds, r.Reentries, r.MaxReaders, r.MaxPermits, r.RW, r.Excess, r.Reentrant, r.Faults, r.FaultKinds, r.Verdict())
	}
	return b.String()
}
