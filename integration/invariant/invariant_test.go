package invariant

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	radmin "github.com/redlock-go/redlock/admin"
	"github.com/redlock-go/redlock/observe"
)

const (
	persistent = 2 // nodes 0 and 1 run appendonly: their restarts keep keys
	// failoverNode (persistent) has a replica it feeds, for the nemesis's
	// fail-overs; behind a connection-keeping proxy.
	failoverNode = 1
	maxTTL       = 5 * time.Second
	semPermits   = 2 // the semaphore's permits
)

// keySpec is one key of the workload: its type and how many workers take
// it, spread over the Clients.
type keySpec struct {
	name    string
	typ     string // "plain", "rw" (ReadLock or WriteLock), "sem" (Permits(semPermits)), "re" (Reentrant, with re-entries), "mix" (plain calls on a typed key)
	workers int
}

// The keys are under lock: (and their typed keys under {lock:), the
// pattern of the documented ACL lines, which one Client's user is made of.
var keySpecs = []keySpec{
	{"lock:key0", "plain", 8}, {"lock:key1", "plain", 8}, {"lock:key2", "plain", 8},
	{"lock:rw0", "rw", 5}, {"lock:rw1", "rw", 5},
	{"lock:sem0", "sem", 5},
	{"lock:re0", "re", 4}, {"lock:re1", "re", 4},
	{"lock:rw1", "mix", 2}, // plain Lock and LockKeys on a read-write lock's key: to a plain lock it is held
}

// avoid (INVARIANT_AVOID, a comma-separated list, or "known" for all)
// leaves out of the workload what a known defect needs: "extend2" two
// Extends of one Lock at once, "renewrace" an Extend of a watchdog lock
// (it races the renewal), "extendrelease" a Release while an Extend of
// the Lock is under way, "observer" the observer's Release on "lost",
// "handoff" local hand-off, "quarantine" a restart quarantine shorter
// than other Clients' TTLs, "evict" the nemesis's evictions (a node that
// evicts for a moment under a maxmemory set at run time: see
// TestComposedLossesRefused); "types" (not part of "known") the typed keys
// (rw, semaphore, reentrant). A diagnostic, to tell a fault of the checker
// from one of the library, and one defect from another.
func avoid(what string) bool {
	for _, a := range strings.Split(os.Getenv("INVARIANT_AVOID"), ",") {
		if a == what || a == "known" {
			return true
		}
	}
	return false
}

// named reports whether INVARIANT_AVOID names what itself ("known" does
// not: what is no known defect).
func named(what string) bool {
	for _, a := range strings.Split(os.Getenv("INVARIANT_AVOID"), ",") {
		if a == what {
			return true
		}
	}
	return false
}

// seed returns INVARIANT_SEED or a fresh seed, logged for a rerun.
func seed(t *testing.T) uint64 {
	if s := os.Getenv("INVARIANT_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("INVARIANT_SEED: %v", err)
		}
		return v
	}
	return uint64(time.Now().UnixNano())
}

// hostileName is a Client name built to look like what the nodes store
// beside owner values (a typed lock's '#' metadata fields, hash tags,
// separators), unique per label; WithName accepts it.
func hostileName(r *mrand.Rand, label string) string {
	prefixes := []string{"#kind", "#intent", "#", "#holder", "{", "}", "#mode/", "%s", "é#", "\\", "*", "redlock"}
	name := prefixes[r.IntN(len(prefixes))] + "/" + label
	if r.IntN(3) == 0 { // near the 64-byte limit
		name += "/" + strings.Repeat("#", 60-len(name))
	}
	return name
}

// client is one Client of the workload and how it picks TTLs.
type client struct {
	name   string
	c      *redlock.Client
	ttl    func(r *mrand.Rand) time.Duration
	closed atomic.Bool
}

func between(r *mrand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)+1))
}

// releaseOnLost is the observer every Client has: it releases a Lock that
// was lost, a natural clean-up.
func releaseOnLost(chk *checker) redlock.Option {
	return redlock.WithObserver(func(ev observe.Event) {
		l, ok := ev.Lock.(*redlock.Lock)
		if ev.Op != "lost" || !ok || avoid("observer") {
			return
		}
		chk.begin(l)
		ctx, cancel := bg(2 * time.Second)
		err := l.Release(ctx)
		cancel()
		chk.end(l)
		chk.note(l, "lost (%v), observer released: %v", ev.Err, err)
	})
}

func clients(t *testing.T, cl *cluster, chk *checker) []*client {
	fixed := func(lo, hi time.Duration) func(r *mrand.Rand) time.Duration {
		return func(r *mrand.Rand) time.Duration { return between(r, lo, hi) }
	}
	cs := []*client{
		{name: "short", ttl: fixed(300*time.Millisecond, 1200*time.Millisecond)},
		{name: "long", ttl: fixed(2*time.Second, 4*time.Second)},
		{name: "watchdog", ttl: func(*mrand.Rand) time.Duration { return redlock.Watchdog }},
		{name: "fenced", ttl: func(r *mrand.Rand) time.Duration {
			if r.IntN(2) == 0 {
				return redlock.Watchdog
			}
			return between(r, 500*time.Millisecond, 2*time.Second)
		}},
		// The extremes: TTLs barely above the drift budget (most such
		// attempts run out of validity before the quorum) next to the
		// longest the workload allows.
		{name: "edge", ttl: func(r *mrand.Rand) time.Duration {
			if r.IntN(2) == 0 {
				return between(r, 3*time.Millisecond, 30*time.Millisecond)
			}
			return between(r, maxTTL-time.Second, maxTTL)
		}},

		// The documented ACL user for the lock types: no pub/sub permission
		// (its waiters poll), every other path the library takes.
		{name: "acl", ttl: fixed(300*time.Millisecond, 2*time.Second)},
	}
	// Every lease is set: maxTTL bounds every TTL, and so how often a
	// node may restart empty (see nemesis).
	opts := [][]redlock.Option{
		{redlock.WithWatchdog(time.Second, 300*time.Millisecond)},
		{redlock.WithWatchdog(3*time.Second, time.Second)},
		{redlock.WithWatchdog(2*time.Second, 500*time.Millisecond)},
		{redlock.WithFencing(), redlock.WithWatchdog(1500*time.Millisecond, 400*time.Millisecond)},
		{redlock.WithWatchdog(maxTTL, time.Second)},
		{redlock.WithWatchdog(2*time.Second, 500*time.Millisecond)},
	}
	names := mrand.New(mrand.NewPCG(uint64(len(cs)), 7))
	for i, c := range cs {
		// A node timeout above the proxy's and the machine's hiccups;
		// the call timeout is also capped at a tenth of the TTL.
		name := hostileName(names, c.name)
		t.Logf("client %s is named %q", c.name, name)
		o := append([]redlock.Option{redlock.WithNodeTimeout(300 * time.Millisecond), redlock.WithName(name), releaseOnLost(chk)}, opts[i]...)
		if avoid("handoff") {
			o = append(o, redlock.WithLocalHandoff(redlock.LocalHandoffOff, 0))
		}
		// The restart quarantine's deployment window is 1 s, shorter
		// than most TTLs: a restarted node stays out as long as the
		// longest TTL the Clients published in the nodes' registers (at
		// most maxTTL). The default window (45 s) would keep nodes out
		// far longer than any lock here: with a restart every few
		// seconds, after about 30 s most nodes were out at once and no
		// lock was granted for the rest of a long run.
		if avoid("quarantine") {
			o = append(o, redlock.WithRestartQuarantine(2*maxTTL))
		} else {
			o = append(o, redlock.WithRestartQuarantine(time.Second))
		}
		urls := cl.urls()
		if c.name == "acl" {
			urls = cl.aclURLs()
		}
		c.c = newClient(t, urls, o...)
	}
	return cs
}

// worker runs random operations on key through its Client until stop.
type worker struct {
	chk  *checker
	c    *client
	all  []*client
	key  string
	typ  string // keySpec.typ
	r    *mrand.Rand
	ops  *atomic.Int64
	stop *atomic.Bool
}

// opts are the LockOptions of a call that takes the worker's key: its
// type (rw: a reader twice as often as a writer).
func (w *worker) opts(r *mrand.Rand) []redlock.LockOption {
	switch w.typ {
	case "rw":
		if r.IntN(3) == 0 {
			return []redlock.LockOption{redlock.WriteLock()}
		}
		return []redlock.LockOption{redlock.ReadLock()}
	case "sem":
		return []redlock.LockOption{redlock.Permits(semPermits)}
	case "re":
		return []redlock.LockOption{redlock.Reentrant()}
	}
	return nil
}

// info is what the checker needs of a Lock of the worker's key beyond
// what it reports (see typed); parent: the Lock a reentrant call's ctx
// carried, or nil.
func (w *worker) info(parent *redlock.Lock) typed {
	if w.typ == "sem" {
		return typed{sem: w.key, permits: semPermits}
	}
	return typed{parent: parent}
}

// sub is a random source for a goroutine of the worker (w.r is not safe
// for concurrent use).
func (w *worker) sub() *mrand.Rand { return mrand.New(mrand.NewPCG(w.r.Uint64(), w.r.Uint64())) }

func (w *worker) run() {
	for !w.stop.Load() {
		if w.c.closed.Load() {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if w.r.IntN(10) == 0 {
			w.runFn()
		} else {
			w.hold()
		}
	}
}

func (w *worker) sleep(d time.Duration) { time.Sleep(d) }

// hold takes the key (Lock or TryLock), does a few things with it and
// releases it (or, rarely, lets a fixed-TTL lock run out). A reentrant
// hold is often entered again (entries of entries too, and now and then
// a call of another Client with the Lock in its ctx, which is no entry);
// each entry then lives on its own, concurrently: its own Extends, checks
// and Release, in any order.
func (w *worker) hold() {
	ttl := w.c.ttl(w.r)
	ctx, cancel := bg(between(w.r, 100*time.Millisecond, 1500*time.Millisecond))
	call := time.Now()
	var l *redlock.Lock
	var err error
	switch {
	case w.typ == "mix" && w.r.IntN(2) == 0: // the typed key first: the checker reads l.Key()
		l, err = w.c.c.LockKeys(ctx, []string{w.key, w.key + ":side"}, ttl)
	case w.r.IntN(3) == 0:
		l, err = w.c.c.TryLock(ctx, w.key, ttl, w.opts(w.r)...)
	default:
		l, err = w.c.c.Lock(ctx, w.key, ttl, w.opts(w.r)...)
	}
	ret := time.Now()
	cancel()
	w.ops.Add(1)
	if err != nil {
		w.chk.failed(w.c.name, err, ret)
		w.sleep(between(w.r, 0, 20*time.Millisecond))
		return
	}
	w.chk.acquiredTyped(l, w.c.name, call, ret, w.info(nil))
	w.chk.note(l, "%s acquired %s %q ttl %v, remaining %v", w.c.name, l.Kind(), l.Key(), ttl, l.Remaining())
	if (w.typ == "re" || w.typ == "rw") && w.r.IntN(6) == 0 {
		w.heldByCaller(l)
	}
	held := []entry{{l, ttl}}
	if w.typ == "re" && w.r.IntN(2) == 0 {
		held = append(held, w.reenter(l, 1+w.r.IntN(3))...)
	}
	if len(held) == 1 {
		w.use(w.r, l, ttl)
		return
	}
	var wg sync.WaitGroup
	for _, e := range held {
		r := w.sub()
		wg.Add(1)
		go func() { defer wg.Done(); w.use(r, e.l, e.ttl) }()
	}
	wg.Wait()
}

type entry struct {
	l   *redlock.Lock
	ttl time.Duration
}

// reenter makes up to n calls that enter root's hold, each with a Lock of
// the hold (root or an entry made before) in its ctx; now and then the
// call is another Client's, which does not enter (a hold of its own,
// refused while root's lives).
func (w *worker) reenter(root *redlock.Lock, n int) []entry {
	var out []entry
	for ; n > 0; n-- {
		parent := root
		if len(out) > 0 && w.r.IntN(2) == 0 {
			parent = out[w.r.IntN(len(out))].l
		}
		c := w.c
		if w.r.IntN(8) == 0 {
			c = w.all[w.r.IntN(len(w.all))]
		}
		ttl := c.ttl(w.r)
		ctx, cancel := bg(between(w.r, 100*time.Millisecond, time.Second))
		ctx = redlock.WithLock(ctx, parent)
		call := time.Now()
		var l *redlock.Lock
		var err error
		if w.r.IntN(2) == 0 {
			l, err = c.c.TryLock(ctx, w.key, ttl, redlock.Reentrant())
		} else {
			l, err = c.c.Lock(ctx, w.key, ttl, redlock.Reentrant())
		}
		ret := time.Now()
		cancel()
		w.ops.Add(1)
		what := "re-entry"
		if c != w.c {
			what = "other Client with the Lock in ctx"
		}
		if err != nil {
			w.chk.tally(what + " refused")
			w.chk.note(parent, "%s re-entry: %v", c.name, err)
			continue
		}
		w.chk.tally(what + " granted")
		// The checker takes it for an entry of parent's hold if both
		// are of one Client, else for a hold of its own, as the library.
		w.chk.acquiredTyped(l, c.name, call, ret, w.info(parent))
		w.chk.note(l, "%s entered (ctx: %s) ttl %v, remaining %v", c.name, short(parent.Owner()), ttl, l.Remaining())
		out = append(out, entry{l, ttl})
	}
	return out
}

// heldByCaller asks the key again with l, held, in the ctx, as another
// type (reentrant: plain, read or write; rw: read or write): it must be
// refused with ErrHeldByCaller, before any traffic. When l still reports
// held after the call, it was held during it, so any other answer breaks
// the promise.
func (w *worker) heldByCaller(l *redlock.Lock) {
	opts := []redlock.LockOption{redlock.ReadLock(), redlock.WriteLock(), nil}[w.r.IntN(3)]
	var o []redlock.LockOption
	if opts != nil {
		o = append(o, opts)
	} else if l.Kind() != observe.KindReentrant {
		o = append(o, redlock.WriteLock())
	}
	ctx, cancel := bg(300 * time.Millisecond)
	call := time.Now()
	x, err := w.c.c.TryLock(redlock.WithLock(ctx, l), w.key, time.Second, o...)
	ret := time.Now()
	cancel()
	w.ops.Add(1)
	after := l.Err()
	w.chk.tally(fmt.Sprintf("asked again as another type: %v", errors.Is(err, redlock.ErrHeldByCaller)))
	w.chk.note(l, "asked again as another type with it in ctx: %v (it: %v)", err, after)
	if x != nil {
		w.chk.acquired(x, w.c.name, call, ret)
		w.chk.op(x, func() {
			ctx, cancel := bg(2 * time.Second)
			_ = x.Release(ctx)
			cancel()
		})
	}
	if after == nil && !errors.Is(err, redlock.ErrHeldByCaller) {
		w.chk.violation("heldbycaller "+l.Owner(), "(ErrHeldByCaller) key %q: %s %s %s held before and after a call with it in ctx for %v, which returned %v (a Lock: %v)",
			w.key, w.c.name, l.Kind(), short(l.Owner()), o, err, x != nil)
	}
}

// use does a few things with l, held, then releases it (or, rarely, lets
// a fixed-TTL lock run out).
func (w *worker) use(r *mrand.Rand, l *redlock.Lock, ttl time.Duration) {
	for n := r.IntN(4); n > 0; n-- {
		switch r.IntN(4) {
		case 0:
			w.sleep(between(r, 0, 100*time.Millisecond))
		case 1:
			if !avoid("renewrace") || ttl != redlock.Watchdog {
				w.extend(l, between(r, 200*time.Millisecond, maxTTL))
			}
		case 2:
			if !avoid("extend2") {
				w.extend2(l, between(r, 200*time.Millisecond, maxTTL), between(r, 200*time.Millisecond, maxTTL))
			}
		case 3:
			w.chk.check([]*redlock.Lock{l})
		}
	}
	hold := between(r, 0, 100*time.Millisecond)
	if ttl != redlock.Watchdog && r.IntN(10) == 0 {
		hold = between(r, ttl/2, ttl+ttl/5) // may outlive it: lost, then the observer releases it
	}
	w.sleep(hold)
	if ttl != redlock.Watchdog && r.IntN(20) == 0 {
		select { // abandoned: it ends at its deadline
		case <-l.Done():
		case <-time.After(maxTTL + time.Second):
		}
	}
	var racing sync.WaitGroup
	if !avoid("extendrelease") && r.IntN(8) == 0 { // Release while an Extend of l is under way
		racing.Add(1)
		ttl := between(r, 200*time.Millisecond, maxTTL)
		go func() { defer racing.Done(); w.extend(l, ttl) }()
		w.sleep(between(r, 0, 5*time.Millisecond))
	}
	w.chk.op(l, func() {
		ctx, cancel := bg(2 * time.Second)
		err := l.Release(ctx)
		cancel()
		w.chk.note(l, "released: %v", err)
	})
	racing.Wait()
	w.ops.Add(1)
}

func (w *worker) extend(l *redlock.Lock, ttl time.Duration) {
	w.chk.op(l, func() {
		ctx, cancel := bg(time.Second)
		w.chk.note(l, "extend(%v) starts", ttl)
		err := l.Extend(ctx, ttl)
		cancel()
		w.chk.note(l, "extend(%v): %v, remaining %v", ttl, err, l.Remaining())
	})
	w.ops.Add(1)
}

// extend2 extends l twice at once, from two goroutines.
func (w *worker) extend2(l *redlock.Lock, a, b time.Duration) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, ttl := range []time.Duration{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			w.extend(l, ttl)
		}()
	}
	close(start)
	wg.Wait()
}

// runFn holds the key through Client.Run; on a reentrant key, fn now and
// then enters the hold with its ctx (TryLock, Reentrant), and releases the
// entry before it returns or after Run did.
func (w *worker) runFn() {
	ctx, cancel := bg(between(w.r, 300*time.Millisecond, 2*time.Second))
	defer cancel()
	call := time.Now()
	hold := between(w.r, 0, 150*time.Millisecond)
	enter := w.typ == "re" && w.r.IntN(2) == 0
	early := w.r.IntN(2) == 0
	ttl := w.c.ttl(w.r)
	var held, in *redlock.Lock
	release := func(l *redlock.Lock) {
		w.chk.op(l, func() {
			ctx, cancel := bg(2 * time.Second)
			err := l.Release(ctx)
			cancel()
			w.chk.note(l, "released: %v", err)
		})
	}
	_ = w.c.c.Run(ctx, w.key, func(ctx context.Context) error {
		l := redlock.LockFrom(ctx)
		w.chk.acquiredTyped(l, w.c.name, call, time.Now(), w.info(nil))
		w.chk.note(l, "%s Run acquired %s %q, remaining %v", w.c.name, l.Kind(), l.Key(), l.Remaining())
		if enter {
			call := time.Now()
			e, err := w.c.c.TryLock(ctx, w.key, ttl, redlock.Reentrant())
			w.chk.tally(fmt.Sprintf("re-entry in Run's fn granted: %v", err == nil))
			if err == nil {
				w.chk.acquiredTyped(e, w.c.name, call, time.Now(), w.info(l))
				w.chk.note(e, "%s entered in Run's fn (of %s) ttl %v", w.c.name, short(l.Owner()), ttl)
				in = e
			} else {
				w.chk.note(l, "%s re-entry in Run's fn: %v", w.c.name, err)
			}
		}
		select {
		case <-time.After(hold):
		case <-ctx.Done():
		}
		if in != nil && early {
			release(in)
			in = nil
		}
		w.chk.begin(l) // Run releases it after fn returns
		held = l
		return nil
	}, w.opts(w.r)...)
	if held != nil {
		w.chk.end(held)
		w.chk.check([]*redlock.Lock{held})
	}
	if in != nil {
		w.chk.check([]*redlock.Lock{in})
		release(in)
	}
	w.ops.Add(1)
}

// registerErrors are the error replies the nemesis puts in place of a
// node's answer to a request that names the TTL register.
var registerErrors = []string{
	"OOM command not allowed when used memory > 'maxmemory'.",
	"MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk.",
	"LOADING Redis is loading the dataset in memory",
	"BUSY Redis is busy running a script.",
}

// nemesis injects minority faults until stop, one event at a time, now
// and then two back to back on one node: a node frozen (SIGSTOP),
// restarted (with its AOF on nodes 0-1, empty on the others, the last
// keptNodes of them and the fail-over node behind proxies that keep the
// Clients' connections), replaced by an empty server with its config
// (0-1), failed over to its lagging replica which then restarts (the
// fail-over node), made to evict keys, cut off from the Clients (proxy),
// or answering one request that names the TTL register with an error
// reply (see faults). Events that may lose keys hit one node per
// maxTTL+1s at most, so that no lock loses a majority (faults.free); the
// second of two events on the node that just lost keys may lose keys too
// (faults.mayLose). It leaves every node running and reachable.
func nemesis(t *testing.T, cl *cluster, chk *checker, r *mrand.Rand, stop *atomic.Bool, counts map[string]int, log *[]string) {
	f := newFaults(cl, chk, r)
	kinds, losses := allKinds, lossyKinds
	if avoid("evict") {
		kinds, losses = without(kinds, kEvict), without(losses, kEvict)
	}
	event := func(kind string, i int, after string) bool {
		begin := time.Now()
		target, err := f.apply(kind, i)
		counts[kind]++
		what := kind
		if after != "" {
			counts[after+">"+kind]++
			what = "then " + kind
		}
		*log = append(*log, fmt.Sprintf("%v-%v %s %s", chk.rel(begin), chk.rel(time.Now()), what, target))
		if err != nil {
			t.Errorf("%s %s: %v", kind, target, err)
			return false
		}
		return true
	}
	for !stop.Load() {
		time.Sleep(between(r, 200*time.Millisecond, 800*time.Millisecond))
		if stop.Load() {
			return
		}
		kind := kinds[r.IntN(len(kinds))]
		if f.free() { // a loss as often as the rule allows, each kind in turn: all of them in a short run too
			kind = leastUsed(r, losses, counts)
		}
		i := f.node(kind)
		if !f.fits(kind, i) || lossy(kind) && !f.free() {
			kind, i = kFreeze, f.node(kFreeze)
		}
		if !event(kind, i, "") {
			return
		}
		// Two in a row on one node, more often after a loss.
		if r.IntN(4) >= 1+btoi(lossy(kind)) || stop.Load() {
			continue
		}
		then := f.then(kind, i, losses)
		time.Sleep(between(r, 0, 200*time.Millisecond))
		if !event(then, i, kind) {
			return
		}
	}
}

// then picks the event that follows first on node i: a restart (with the
// AOF where there is one, more likely than the rest), another loss of
// losses if the rule allows it (on i it does after a loss), a freeze, a
// partition.
//
// Never an eviction then a restart with the AOF: the nemesis switches the
// policy to evicting at run time and back, so a Client that sent that node
// no grant in between (the guard compares evicted_keys on every grant)
// cannot know of the eviction once the restart reset the count: outside
// the model (SAFETY.md, "Node trust"; TestComposedLossOutsideTheModel).
func (f *faults) then(first string, i int, losses []string) string {
	restart := f.fits(kRestartAOF, i) && first != kEvict
	if lossy(first) && restart && f.r.IntN(2) == 0 {
		return kRestartAOF // a loss, then a restart that loads what is left
	}
	c := []string{kFreeze, kPartition}
	if restart {
		c = append(c, kRestartAOF, kRestartAOF, kRestartAOF)
	}
	if f.mayLose(i) {
		for _, k := range losses {
			if f.fits(k, i) && !(k == kFailover && first == kFailover) {
				c = append(c, k)
			}
		}
	}
	return c[f.r.IntN(len(c))]
}

// leastUsed is the kind of ks that counts has least of (the first such
// after a random rotation); restart-empty, the oldest of them, counts one
// more: a short run, which has room for three or four losses, has each of
// the others.
func leastUsed(r *mrand.Rand, ks []string, counts map[string]int) string {
	n := func(k string) int { return counts[k] + btoi(k == kEmpty) }
	off := r.IntN(len(ks))
	best := ks[off]
	for j := range ks {
		if k := ks[(off+j)%len(ks)]; n(k) < n(best) {
			best = k
		}
	}
	return best
}

// without is ks without k.
func without(ks []string, k string) []string {
	var out []string
	for _, x := range ks {
		if x != k {
			out = append(out, x)
		}
	}
	return out
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// startWorkers starts the workers of every key (keySpecs), spread over
// the Clients.
func startWorkers(cs []*client, chk *checker, sd uint64, stop *atomic.Bool, ops *atomic.Int64) *sync.WaitGroup {
	var wg sync.WaitGroup
	n := 0
	specs := keySpecs
	if named("types") { // the plain keys only, as many workers as before the types
		specs = []keySpec{{"lock:key0", "plain", 10}, {"lock:key1", "plain", 10}, {"lock:key2", "plain", 10}}
	}
	for k, ks := range specs {
		for g := 0; g < ks.workers; g++ {
			n++
			w := &worker{chk: chk, c: cs[(k+g)%len(cs)], all: cs, key: ks.name, typ: ks.typ,
				r: mrand.New(mrand.NewPCG(sd, uint64(n))), ops: ops, stop: stop}
			wg.Add(1)
			go func() { defer wg.Done(); w.run() }()
		}
	}
	return &wg
}

// TestInvariant runs the randomized workload under faults and checks the
// promise all along (see checker). INVARIANT_SEED reruns one seed (the
// faults' and operations' choices; timing still varies), INVARIANT_LONG=1
// runs about 3 minutes instead of 20 s.
func TestInvariant(t *testing.T) {
	sd := seed(t)
	t.Logf("seed %d (rerun: INVARIANT_SEED=%d)", sd, sd)
	if a := os.Getenv("INVARIANT_AVOID"); a != "" {
		t.Logf("INVARIANT_AVOID=%s", a)
	}
	dur := 20 * time.Second
	if os.Getenv("INVARIANT_LONG") != "" {
		dur = 165 * time.Second
	}
	cl := startReplicated(t, persistent, failoverNode)
	chk := newChecker(t, cl.nodes)
	cs := clients(t, cl, chk)
	begin := time.Now()
	var stop, stopSampler atomic.Bool
	var ops atomic.Int64
	workers := startWorkers(cs, chk, sd, &stop, &ops)
	var bgwg sync.WaitGroup
	bgwg.Add(2)
	go func() {
		defer bgwg.Done()
		for !stopSampler.Load() {
			chk.sampleAll()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	faults := map[string]int{}
	var faultLog []string
	go func() {
		defer bgwg.Done()
		nemesis(t, cl, chk, mrand.New(mrand.NewPCG(sd, 0)), &stop, faults, &faultLog)
	}()

	rnd := mrand.New(mrand.NewPCG(sd, 1<<40))
	time.Sleep(dur * 17 / 20)
	victim := cs[rnd.IntN(len(cs))]
	victim.closed.Store(true)
	t.Logf("closing client %s", victim.name)
	closeGuarded(t, victim.name, victim.c)
	time.Sleep(dur * 3 / 20)

	stop.Store(true)
	wedged := !guard(30*time.Second, workers.Wait) // every operation is bounded well within it
	if wedged {
		dumpStacks(t)
		t.Errorf("the workload did not finish within 30s of its end: an operation never returned (a wedged Client); its Clients are not closed")
	}
	stopSampler.Store(true)
	bgwg.Wait()
	chk.sampleAll()
	chk.overlaps()
	if !wedged {
		for _, c := range cs {
			if !c.closed.Load() {
				closeGuarded(t, c.name, c.c)
			}
		}
	}
	t.Logf("%d operations, %d locks, %d checks against the nodes, faults %v", ops.Load(), len(chk.recs), chk.samples.Load(), faults)
	t.Logf("locks by type: %s", chk.kinds())
	by := chk.byClient()
	t.Logf("locks by Client: %v", by)
	if by["acl"] == 0 {
		t.Errorf("the Client made from the ACL line of docs/deployment.md took no lock in %v: %s", dur, aclCause(chk))
	}
	t.Logf("locks per key per %v: %s", dur/10, chk.perKey(begin, dur/10))
	t.Logf("failed acquisitions per %v: %s", dur/10, chk.failures(begin, dur/10))
	if n := chk.count.Load(); n > 0 || os.Getenv("INVARIANT_FAULTS") != "" {
		t.Logf("faults:\n%s", joinLines(faultLog))
	}
	if n := chk.count.Load(); n > 0 {
		t.Errorf("%d violations of the promise by %d Locks or pairs (seed %d); the first of each:\n%s", n, len(chk.seen), sd, joinLines(chk.found))
	}
}

// aclCause says why the ACL line's Client took no lock, what was observed
// first: how its acquisitions failed and what the nodes answered; the
// ACL line is named as the cause only if a node refused its user
// (NOPERM), else the cause is what the nodes did answer (timeouts,
// quarantines, other holders).
func aclCause(chk *checker) string {
	failed, classes, nodes := chk.causes("acl")
	s := fmt.Sprintf("%d acquisitions failed (%v); their last rounds' node answers: %v", failed, classes, nodes)
	for cause := range nodes {
		if strings.Contains(cause, "NOPERM") {
			return s + "; a node refused the user (NOPERM): the ACL line lacks a command, key or channel the Client needs"
		}
	}
	if failed == 0 {
		return s + "; it made no acquisition that returned: see the workload's log"
	}
	return s + "; no node refused the user: not the ACL line, but what the nodes answered"
}

func joinLines(ss []string) string {
	out := ""
	for _, s := range ss {
		out += "  " + s + "\n"
	}
	return out
}

// TestInvariantCheckerCanFail breaks the model on purpose and requires the
// checker to see it.
func TestInvariantCheckerCanFail(t *testing.T) {
	t.Run("keys deleted behind the library's back", func(t *testing.T) {
		cl := startCluster(t, 0)
		chk := newChecker(t, cl.nodes)
		chk.silent = true
		c := newClient(t, cl.urls())
		defer closeGuarded(t, "client", c)
		ctx, cancel := bg(10 * time.Second)
		defer cancel()
		call := time.Now()
		l, err := c.Lock(ctx, "k", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		chk.acquired(l, "a", call, time.Now())
		if chk.count.Load() != 0 {
			t.Fatalf("violation before the fault: %v", chk.found)
		}
		chk.delAll(t, "k")
		chk.sampleAll()
		if chk.count.Load() == 0 {
			t.Fatalf("the checker did not see a held Lock whose keys are gone from every node")
		}
		t.Logf("seen, as it must be: %s", chk.found[0])
		_ = l.Release(ctx)
	})
	t.Run("majority restarted empty, quarantine off", func(t *testing.T) {
		cl := startCluster(t, 0)
		chk := newChecker(t, cl.nodes)
		chk.silent = true
		off := redlock.WithRestartQuarantine(redlock.QuarantineOff)
		a := newClient(t, cl.urls(), off)
		defer closeGuarded(t, "a", a)
		b := newClient(t, cl.urls(), off)
		defer closeGuarded(t, "b", b)
		ctx, cancel := bg(20 * time.Second)
		defer cancel()
		call := time.Now()
		la, err := a.Lock(ctx, "k", 20*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		chk.acquired(la, "a", call, time.Now())
		for i := 2; i < 5; i++ {
			chk.restarting(i)
			if err := cl.nodes[i].Restart(); err != nil {
				t.Fatal(err)
			}
			chk.restarted(i)
		}
		call = time.Now()
		lb, err := b.Lock(ctx, "k", 5*time.Second)
		if err != nil {
			t.Fatalf("B: %v", err)
		}
		chk.acquired(lb, "b", call, time.Now())
		chk.sampleAll()
		chk.overlaps()
		if chk.count.Load() == 0 {
			t.Fatalf("the checker did not see two holders of one key")
		}
		t.Logf("seen, as it must be: %s", chk.found[0])
		_ = lb.Release(ctx)
		_ = la.Release(ctx)
	})
}

// TestInvariantCheckerCanFailTypes breaks each lock type's promise on
// purpose (keys or entries deleted behind the library's back) and
// requires the checker to see it, and to see nothing in the states each
// type allows (readers together, entries of one hold, n permits).
func TestInvariantCheckerCanFailTypes(t *testing.T) {
	cl := startCluster(t, 0)
	a := newClient(t, cl.urls(), redlock.WithName("a"))
	defer closeGuarded(t, "a", a)
	b := newClient(t, cl.urls(), redlock.WithName("b"))
	defer closeGuarded(t, "b", b)
	ctx, cancel := bg(time.Minute)
	defer cancel()
	name := map[*redlock.Client]string{a: "a", b: "b"}
	take := func(t *testing.T, chk *checker, c *redlock.Client, key string, ty typed, opts ...redlock.LockOption) *redlock.Lock {
		t.Helper()
		ctx := ctx
		if ty.parent != nil {
			ctx = redlock.WithLock(ctx, ty.parent)
		}
		call := time.Now()
		l, err := c.TryLock(ctx, key, 20*time.Second, opts...)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		chk.acquiredTyped(l, name[c], call, time.Now(), ty)
		return l
	}
	quiet := func(t *testing.T, chk *checker, what string) {
		t.Helper()
		chk.sampleAll()
		chk.overlaps()
		if chk.count.Load() != 0 {
			t.Fatalf("%s: the checker reports what the type allows: %v", what, chk.found)
		}
	}
	must := func(t *testing.T, chk *checker, prefix, what string) {
		t.Helper()
		chk.sampleAll()
		chk.overlaps()
		for _, f := range chk.found {
			if strings.HasPrefix(f, prefix) {
				t.Logf("seen, as it must be: %s", f)
				return
			}
		}
		t.Fatalf("the checker did not see %s (%q): %v", what, prefix, chk.found)
	}
	release := func(ls ...*redlock.Lock) {
		for _, l := range ls {
			_ = l.Release(ctx)
		}
	}
	t.Run("rw: a writer with readers", func(t *testing.T) {
		chk := newChecker(t, cl.nodes)
		chk.silent = true
		r1 := take(t, chk, a, "rw", typed{}, redlock.ReadLock())
		r2 := take(t, chk, b, "rw", typed{}, redlock.ReadLock())
		quiet(t, chk, "two readers")
		chk.delAll(t, "rw")
		w := take(t, chk, b, "rw", typed{}, redlock.WriteLock())
		must(t, chk, `(2) key "rw"`, "a writer held with readers")
		must(t, chk, `(1) key "rw"`, "readers whose entries are gone")
		release(r1, r2, w)
	})
	t.Run("reentrant: an entry's field gone", func(t *testing.T) {
		chk := newChecker(t, cl.nodes)
		chk.silent = true
		outer := take(t, chk, a, "re1", typed{}, redlock.Reentrant())
		inner := take(t, chk, a, "re1", typed{parent: outer}, redlock.Reentrant())
		quiet(t, chk, "two entries of one hold")
		for i, ad := range chk.admin {
			if err := ad.HDel(ctx, "re1", inner.Owner()).Err(); err != nil {
				t.Fatalf("HDEL on node %d: %v", i, err)
			}
		}
		if v := chk.verify(outer); v != "" {
			t.Fatalf("the outer entry, untouched, is reported: %s", v)
		}
		if v := chk.verify(inner); v == "" {
			t.Fatalf("the checker did not see an entry whose field is gone from every node")
		} else {
			t.Logf("seen, as it must be: %s", v)
		}
		release(inner, outer)
	})
	t.Run("reentrant: two holds", func(t *testing.T) {
		chk := newChecker(t, cl.nodes)
		chk.silent = true
		outer := take(t, chk, a, "re2", typed{}, redlock.Reentrant())
		inner := take(t, chk, a, "re2", typed{parent: outer}, redlock.Reentrant())
		quiet(t, chk, "two entries of one hold")
		chk.delAll(t, "re2")
		other := take(t, chk, b, "re2", typed{parent: outer}, redlock.Reentrant()) // b's, with outer in its ctx: a hold of its own
		must(t, chk, `(2) key "re2"`, "two reentrant holds at once")
		release(inner, outer, other)
	})
	t.Run("semaphore: more holders than permits", func(t *testing.T) {
		chk := newChecker(t, cl.nodes)
		chk.silent = true
		p1 := take(t, chk, a, "sem", typed{sem: "sem", permits: 2}, redlock.Permits(2))
		p2 := take(t, chk, b, "sem", typed{sem: "sem", permits: 2}, redlock.Permits(2))
		quiet(t, chk, "two holders of two permits")
		// A holder that thinks the semaphore has 3 permits is a third
		// holder of the 2 the others count on.
		p3 := take(t, chk, b, "sem", typed{sem: "sem", permits: 2}, redlock.Permits(3))
		must(t, chk, `(2) semaphore "sem" of 2 permits: 3 Locks`, "three holders of two permits")
		release(p1, p2, p3)
	})
	t.Run("semaphore: a permit taken twice", func(t *testing.T) {
		chk := newChecker(t, cl.nodes)
		chk.silent = true
		p1 := take(t, chk, a, "sem2", typed{sem: "sem2", permits: 1}, redlock.Permits(1))
		chk.delAll(t, radmin.PermitKey("sem2", 0))
		p2 := take(t, chk, b, "sem2", typed{sem: "sem2", permits: 1}, redlock.Permits(1))
		must(t, chk, `(2) key "{sem2}:permit:0"`, "one permit held twice")
		must(t, chk, `(2) semaphore "sem2" of 1 permits: 2 Locks`, "two holders of one permit")
		release(p1, p2)
	})
}
