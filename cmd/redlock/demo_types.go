package main

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/redlock-go/redlock"
)

// demoTypes are the lock types --type accepts, in help order.
var demoTypes = []string{"plain", "reentrant", "rw", "semaphore"}

// defaultPermits is the semaphore's size when --permits is not given.
const defaultPermits = 3

// checkType validates --type and --permits before anything starts;
// permitsSet reports whether --permits was given.
func checkType(typ string, permits int, permitsSet bool) error {
	known := false
	for _, t := range demoTypes {
		known = known || t == typ
	}
	switch {
	case !known:
		return usageErr("--type %q: want one of %s", typ, strings.Join(demoTypes, ", "))
	case permitsSet && typ != "semaphore":
		return usageErr("--permits is for --type semaphore, not %s", typ)
	case permits < 1:
		return usageErr("--permits %d: must be at least 1", permits)
	}
	return nil
}

// demoKey is the key the workers contend for: plain keeps today's key, the
// others have their own, so that a leftover of one type on --nodes does
// not make the next type's calls fail with ErrWrongType.
func demoKey(typ string) string {
	if typ == "plain" {
		return "redlock:demo"
	}
	return "redlock:demo:" + typ
}

// guarantee is what the guard checks, for the summary.
func guarantee(typ string, permits int) string {
	switch typ {
	case "rw":
		return "a writer beside a reader or another writer"
	case "semaphore":
		return fmt.Sprintf("more than %d holders, or two on one permit", permits)
	case "reentrant":
		return "a second hold inside while one is"
	}
	return "two workers inside at once"
}

// guard counts the workers inside, in-process, and flags every entry the
// type's guarantee forbids. A mutex, not atomics: a check reads several
// counts at once.
type guard struct {
	mu         sync.Mutex
	typ        string
	permits    int
	readers    int            // rw readers inside
	holders    int            // everyone else inside: writers, holds, permits
	perKey     map[string]int // semaphore: holders inside per permit key
	most       int            // most inside at once (readers and holders)
	mostRead   int            // most readers inside at once
	violations int
	since      time.Time     // when the current busy stretch began
	busy       time.Duration // closed busy stretches: someone was inside
}

func newGuard(typ string, permits int) *guard {
	return &guard{typ: typ, permits: permits, perKey: map[string]int{}}
}

// enter records a worker coming in as a reader (read) or a holder, on key
// (the permit's key for a semaphore).
func (g *guard) enter(read bool, key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.readers+g.holders == 0 {
		g.since = time.Now()
	}
	bad := false
	if read {
		g.readers++
		bad = g.holders > 0
	} else {
		g.holders++
		g.perKey[key]++
		if g.typ == "semaphore" {
			bad = g.holders > g.permits || g.perKey[key] > 1
		} else {
			bad = g.holders > 1 || g.readers > 0
		}
	}
	if bad {
		g.violations++
	}
	g.most = max(g.most, g.readers+g.holders)
	g.mostRead = max(g.mostRead, g.readers)
}

func (g *guard) exit(read bool, key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if read {
		g.readers--
	} else {
		g.holders--
		g.perKey[key]--
	}
	if g.readers+g.holders == 0 {
		g.busy += time.Since(g.since)
	}
}

// busyTime is how long someone was inside so far, the open stretch too.
func (g *guard) busyTime() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.readers+g.holders > 0 {
		return g.busy + time.Since(g.since)
	}
	return g.busy
}

func (g *guard) counts() (violations, most, mostRead int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.violations, g.most, g.mostRead
}

// cycle is one acquisition by a worker: it returns the wait to acquire
// (the first entry's, for reentrant) and whether it was a write (rw).
type cycle struct {
	wait  time.Duration
	write bool
}

// oneCycle takes the demo's lock once as its type asks, stays inside
// for hold under the guard's eye and releases.
func (d *demo) oneCycle(ctx context.Context, rng *mrand.Rand) (cycle, error) {
	switch d.typ {
	case "reentrant":
		return d.reentrantCycle(ctx)
	case "rw":
		return d.rwCycle(ctx, rng.IntN(4) == 0)
	}
	var opts []redlock.LockOption
	if d.typ == "semaphore" {
		opts = append(opts, redlock.Permits(d.permits))
	}
	start := time.Now()
	l, err := d.c.Lock(ctx, d.key, d.ttl, opts...)
	if err != nil {
		return cycle{}, err
	}
	c := cycle{wait: time.Since(start)}
	d.g.enter(false, l.Key())
	time.Sleep(d.hold)
	d.g.exit(false, l.Key())
	_ = l.Release(context.Background())
	return c, nil
}

// rwCycle: a reader (3 in 4) or a writer of the read-write lock.
func (d *demo) rwCycle(ctx context.Context, write bool) (cycle, error) {
	opt := redlock.ReadLock()
	if write {
		opt = redlock.WriteLock()
	}
	start := time.Now()
	l, err := d.c.Lock(ctx, d.key, d.ttl, opt)
	if err != nil {
		return cycle{}, err
	}
	c := cycle{wait: time.Since(start), write: write}
	d.g.enter(!write, d.key)
	time.Sleep(d.hold)
	d.g.exit(!write, d.key)
	_ = l.Release(context.Background())
	return c, nil
}

// reentrantCycle takes a hold, enters it again through WithLock and
// releases the first entry before the second: the hold must last until
// its last entry ends, so the guard stays entered until then.
func (d *demo) reentrantCycle(ctx context.Context) (cycle, error) {
	start := time.Now()
	outer, err := d.c.Lock(ctx, d.key, d.ttl, redlock.Reentrant())
	if err != nil {
		return cycle{}, err
	}
	c := cycle{wait: time.Since(start)}
	d.g.enter(false, d.key)
	inner, err := d.c.Lock(redlock.WithLock(ctx, outer), d.key, d.ttl, redlock.Reentrant())
	d.countEntry(ctx, err)
	time.Sleep(d.hold)
	_ = outer.Release(context.Background())
	if inner != nil {
		time.Sleep(d.hold) // inside on the second entry alone
	}
	d.g.exit(false, d.key)
	if inner != nil {
		_ = inner.Release(context.Background())
	}
	return c, nil
}

// countEntry records a re-entry and its failures (not the demo's end).
func (d *demo) countEntry(ctx context.Context, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case err == nil:
		d.entries++
	case ctx.Err() == nil:
		d.entryErrs[shortErr(err)]++
	}
}
