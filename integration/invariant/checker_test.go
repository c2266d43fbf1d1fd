package invariant

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	radmin "github.com/redlock-go/redlock/admin"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/observe"
)

// checker checks the library's promise from outside, through the public
// API and direct reads of the nodes:
//
//  1. a Lock that reports held (Err() == nil, Remaining() = r > 0) while no
//     operation of the workload is in flight on its owner value is held
//     on the nodes: fewer than N-quorum nodes may answer that they do not
//     hold its owner with PTTL >= r - elapsed - 1 ms (a node that does not
//     answer, or that restarted empty or otherwise lost keys since the
//     owner was acquired, is not counted against it);
//  2. no two Locks of one key that exclude each other report held at
//     the same instant: a plain lock, a writer or a permit excludes every
//     other Lock of its key; readers do not exclude readers; the entries
//     of one reentrant hold do not exclude each other (entries of
//     different holds do); and at most n Locks of a semaphore of n
//     permits (on PermitKey(key, 0..n-1), each a plain lock) report held
//     at once.
//
// A typed entry (reentrant, read, write) is held on a node while its
// field in the key's hash has an expiry after the node's TIME, in a hash
// of its type, and the key has not expired: what it holds there is the
// lesser of the field's expiry minus TIME and the key's PTTL.
//
// For (2) every Lock has a definitely-held interval [ret, last]: ret is
// read after Lock returned it (held then), last before a call of Err that
// returned nil (held then); a Lock that ended never holds again, so it was
// held in between. Two such intervals of one key that overlap are two
// holders at once.
type checker struct {
	t     testing.TB
	nodes []*harness.Node
	admin []*redis.Client // per node, under mu once the test runs (repoint)
	need  int
	// silent: violations are not logged as found; the test judges what
	// verify returns (focused tests that also break the model on purpose).
	silent bool

	mu       sync.Mutex
	retired  []*redis.Client // connections repoint replaced
	owners   map[string]*ownerState
	recs     []*rec
	live     map[*redlock.Lock]*rec
	byLock   map[*redlock.Lock]*rec
	restarts [][]time.Time // per node: when each empty restart ended
	found    []string      // violations, the first of each owner value
	seen     map[string]bool
	count    atomic.Int64 // violations
	samples  atomic.Int64 // checks of kind (1) that compared against the nodes
	tallies  map[string]int
	fails    []failure
}

// ownerState counts the workload's operations on one owner value (a Lock
// and the successors it was handed on to share it).
type ownerState struct {
	inflight int
	epoch    uint64 // bumped at every start and end
	acqCall  time.Time
	history  []string  // the workload's last operations, for a report
	badAt    time.Time // first violation of (1) at epoch badEpoch
	badEpoch uint64
}

// note adds what the workload did with l to its owner's history.
func (c *checker) note(l *redlock.Lock, format string, args ...any) {
	msg := fmt.Sprintf("%v ", c.rel(time.Now())) + fmt.Sprintf(format, args...)
	c.mu.Lock()
	s := c.owner(l.Owner())
	if len(s.history) >= 12 {
		s.history = s.history[1:]
	}
	s.history = append(s.history, msg)
	c.mu.Unlock()
}

type rec struct {
	l         *redlock.Lock
	key       string
	owner     string
	client    string
	kind      observe.Kind
	hold      string    // reentrant: the hold as the workload made it (see typed)
	sem       string    // semaphore: its key (key is the permit's)
	permits   int       // semaphore: its n
	ret, last time.Time // definitely held over [ret, last] (last < ret: never seen held after ret)
}

func newChecker(t testing.TB, nodes []*harness.Node) *checker {
	c := &checker{t: t, nodes: append([]*harness.Node(nil), nodes...), need: len(nodes)/2 + 1, owners: map[string]*ownerState{},
		live: map[*redlock.Lock]*rec{}, byLock: map[*redlock.Lock]*rec{}, seen: map[string]bool{}, restarts: make([][]time.Time, len(nodes))}
	for _, n := range nodes {
		c.admin = append(c.admin, checkerConn(n.Addr))
	}
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, a := range append(c.admin, c.retired...) {
			_ = a.Close()
		}
	})
	return c
}

// checkerConn is the checker's connection to the server at addr: short
// timeouts, so that a frozen node just gives no answer.
func checkerConn(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true,
		DialTimeout: 250 * time.Millisecond, ReadTimeout: 250 * time.Millisecond, WriteTimeout: 250 * time.Millisecond,
		MaxRetries: -1, PoolSize: 16})
}

// repoint makes the checker read node i at addr from now on (a fail-over:
// another server answers for the node). A read under way on the old
// connection ends as it would have; the old connection closes with the
// checker.
func (c *checker) repoint(i int, addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.retired = append(c.retired, c.admin[i])
	c.admin[i] = checkerConn(addr)
}

// conns returns the connections to the nodes now.
func (c *checker) conns() []*redis.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*redis.Client(nil), c.admin...)
}

func (c *checker) owner(o string) *ownerState {
	s := c.owners[o]
	if s == nil {
		s = &ownerState{}
		c.owners[o] = s
	}
	return s
}

// begin and end bracket a workload operation (Extend, Release, the release
// inside Run) on l's owner value.
func (c *checker) begin(l *redlock.Lock) {
	c.mu.Lock()
	s := c.owner(l.Owner())
	s.inflight++
	s.epoch++
	c.mu.Unlock()
}

func (c *checker) end(l *redlock.Lock) {
	c.mu.Lock()
	s := c.owner(l.Owner())
	s.inflight--
	s.epoch++
	c.mu.Unlock()
}

// op runs f as a workload operation on l, and checks l after it.
func (c *checker) op(l *redlock.Lock, f func()) {
	c.begin(l)
	f()
	c.end(l)
	c.check([]*redlock.Lock{l}) // at the op boundary
}

// acquired registers l, returned by a call that started at call and
// returned before ret, and checks it at once.
func (c *checker) acquired(l *redlock.Lock, client string, call, ret time.Time) {
	c.acquiredTyped(l, client, call, ret, typed{})
}

// typed is what the checker needs to know of a typed Lock beyond what it
// reports: the reentrant entry's parent (the Lock its call's ctx carried;
// if the parent is of the same Client, by the name acquiredTyped is
// given, it entered the parent's hold; nil: a hold of its own), the
// semaphore's key and permits.
//
// The hold is the parent's hold as the workload made it; a call whose
// parent was already released takes a hold of its own instead, so one
// hold of the checker may be several on the nodes, never the reverse: the
// checker may miss an overlap of those, never report one that is allowed.
type typed struct {
	parent  *redlock.Lock
	sem     string
	permits int
}

// acquiredTyped is acquired for a typed Lock.
func (c *checker) acquiredTyped(l *redlock.Lock, client string, call, ret time.Time, ty typed) {
	c.mu.Lock()
	s := c.owner(l.Owner())
	if s.acqCall.IsZero() || call.Before(s.acqCall) {
		s.acqCall = call
	}
	r := &rec{l: l, key: l.Key(), owner: l.Owner(), client: client, ret: ret, kind: l.Kind(), hold: l.Owner(), sem: ty.sem, permits: ty.permits}
	if p := c.byLock[ty.parent]; ty.parent != nil && p != nil && p.client == client && r.kind == observe.KindReentrant && p.kind == observe.KindReentrant {
		r.hold = p.hold
	}
	c.recs = append(c.recs, r)
	c.live[l] = r
	c.byLock[l] = r
	c.mu.Unlock()
	c.check([]*redlock.Lock{l})
}

// restarting records that node i is about to lose keys: a restart empty,
// a replacement by an empty server, a fail-over to a lagging replica, a
// restart of the promoted one, an eviction; restarted, that the event is
// over (the node is up again, the eviction stopped). The nemesis brackets
// every such event with them.
func (c *checker) restarting(i int) {
	c.mu.Lock()
	c.restarts[i] = append(c.restarts[i], time.Time{}) // in progress
	c.mu.Unlock()
}

func (c *checker) restarted(i int) {
	c.mu.Lock()
	c.restarts[i][len(c.restarts[i])-1] = time.Now()
	c.mu.Unlock()
}

// excused: node i may have lost owner's keys in an empty restart or
// another event that loses keys (one that was still going on, or that
// ended, after owner's acquisition began). c.mu must be held.
func (c *checker) excused(i int, owner string) bool {
	s := c.owners[owner]
	for _, e := range c.restarts[i] {
		if s == nil || e.IsZero() || e.After(s.acqCall) {
			return true
		}
	}
	return false
}

// violation records one; only the first of each owner value (or pair) is
// kept and logged, the later ones are counted.
func (c *checker) violation(who string, format string, args ...any) {
	c.count.Add(1)
	msg := fmt.Sprintf(format, args...)
	c.mu.Lock()
	first := !c.seen[who]
	c.seen[who] = true
	if first && len(c.found) < 20 {
		c.found = append(c.found, msg)
	}
	c.mu.Unlock()
	if first && !c.silent {
		c.t.Logf("VIOLATION: %s", msg)
	}
}

// sampleAll checks every Lock not yet seen ended.
func (c *checker) sampleAll() {
	c.mu.Lock()
	ls := make([]*redlock.Lock, 0, len(c.live))
	for l := range c.live {
		ls = append(ls, l)
	}
	c.mu.Unlock()
	if len(ls) > 0 {
		c.check(ls)
	}
}

// readScript reads the node's TIME (ms), then the TYPE, the value (GET of
// a string, HGETALL of a hash, ” else) and PTTL of every key, all at one
// instant of the node.
var readScript = redis.NewScript(`local t = redis.call('TIME')
local r = {tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)}
for _, k in ipairs(KEYS) do
  local ty = redis.call('TYPE', k)['ok']
  r[#r + 1] = ty
  if ty == 'string' then
    r[#r + 1] = redis.call('GET', k)
  elseif ty == 'hash' then
    r[#r + 1] = redis.call('HGETALL', k)
  else
    r[#r + 1] = ''
  end
  r[#r + 1] = redis.call('PTTL', k)
end
return r`)

// reading is one node's answer for one key.
type reading struct {
	ok     bool   // the node answered
	typ    string // TYPE
	val    string
	fields map[string]string // a hash's
	now    int64             // the node's TIME, ms
	pttl   time.Duration
	at     time.Time // after the answer arrived
}

// holds returns what the node holds of owner's Lock of kind k: whether it
// is there (as the value of a plain lock, or as a live entry of a hash of
// k's type), and for how long (-1: no expiry).
func (x reading) holds(owner string, k observe.Kind) (bool, time.Duration) {
	switch k {
	case observe.KindReentrant, observe.KindRead, observe.KindWrite:
		if x.typ != "hash" {
			return false, 0
		}
		mode, kind := x.fields["#mode"], x.fields["#kind"]
		switch {
		case k == observe.KindReentrant && kind != "reentrant",
			k == observe.KindRead && (kind != "rw" || mode != "r"),
			k == observe.KindWrite && (kind != "rw" || mode != "w"):
			return false, 0
		}
		e, ok := x.fields[owner]
		if !ok || !strings.Contains(owner, ":") { // an entry is an owner value, which has a colon; metadata has none
			return false, 0
		}
		ms, err := strconv.ParseInt(e, 10, 64)
		if err != nil || ms <= x.now {
			return false, 0
		}
		left := time.Duration(ms-x.now) * time.Millisecond
		if x.pttl >= 0 && x.pttl < left {
			left = x.pttl
		}
		return true, left
	default:
		return x.typ == "string" && x.val == owner, x.pttl
	}
}

// other reports whether the node holds the key for someone else than owner.
func (x reading) other(owner string) bool {
	switch x.typ {
	case "string":
		return x.val != owner
	case "hash":
		for f := range x.fields {
			if f != owner && strings.Contains(f, ":") {
				return true
			}
		}
	}
	return false
}

type sample struct {
	l      *redlock.Lock
	owner  string
	key    string
	kind   observe.Kind
	epoch  uint64
	quiet  bool // no workload op in flight at the start
	t1     time.Time
	remain time.Duration
	// claim is the end of validity the Lock reports: the earlier of
	// t1 + remain and what it reports again after the node reads. A
	// watchdog renewal that starts during the reads first pulls the
	// deadline in to its shorter lease, then sends it: its PEXPIRE is
	// measured against the deadline the Lock reports once it was sent.
	claim time.Time
}

// check samples ls: kind (1) for those that report held with no workload
// operation in flight; every Lock seen held extends its interval for (2).
func (c *checker) check(ls []*redlock.Lock) {
	var ss []sample
	keys := map[string]bool{}
	for _, l := range ls {
		c.mu.Lock()
		s := c.owner(l.Owner())
		sm := sample{l: l, owner: l.Owner(), key: l.Key(), kind: l.Kind(), epoch: s.epoch, quiet: s.inflight == 0}
		c.mu.Unlock()
		sm.t1 = time.Now()
		err := l.Err()
		sm.remain = l.Remaining()
		c.mu.Lock()
		r := c.live[l]
		if err != nil || sm.remain <= 0 {
			delete(c.live, l)
		} else if r != nil && sm.t1.After(r.last) {
			r.last = sm.t1
		}
		c.mu.Unlock()
		if err == nil && sm.remain > 0 && sm.quiet {
			ss = append(ss, sm)
			keys[sm.key] = true
		}
	}
	if len(ss) == 0 {
		return
	}
	rd := c.read(keys)
	for _, sm := range ss {
		c.mu.Lock()
		st := c.owners[sm.owner]
		quiet := st.inflight == 0 && st.epoch == sm.epoch
		c.mu.Unlock()
		if !quiet || sm.l.Err() != nil { // an op or the end raced with the sample
			continue
		}
		sm.claim = sm.t1.Add(sm.remain)
		if t2, r2 := time.Now(), sm.l.Remaining(); t2.Add(r2).Before(sm.claim) {
			sm.claim = t2.Add(r2)
		}
		c.samples.Add(1)
		c.judge(sm, rd)
	}
}

// persistAfter is longer than any node call of the workload's Clients
// (their node timeout): a violation that persists that long, with no
// workload operation since, is not an internal renewal still in flight.
const persistAfter = 400 * time.Millisecond

// persisting records a violation of (1) by sm and reports whether one was
// seen persistAfter earlier or more with no workload operation since.
func (c *checker) persisting(sm sample) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.owners[sm.owner]
	if s.badAt.IsZero() || s.badEpoch != sm.epoch {
		s.badAt, s.badEpoch = sm.t1, sm.epoch
		return false
	}
	return sm.t1.Sub(s.badAt) >= persistAfter
}

// judge applies (1) to one sample.
func (c *checker) judge(sm sample, rd []map[string]reading) {
	bad, hold, unknown := 0, 0, 0
	var detail []string
	c.mu.Lock()
	for i := range c.nodes {
		x, ok := rd[i][sm.key]
		// A hash entry's expiry and the node's TIME are whole ms: 1 ms
		// more of slack.
		slack := time.Millisecond
		if x.typ == "hash" {
			slack = 2 * time.Millisecond
		}
		bound := sm.claim.Sub(x.at) - slack
		there, left := x.holds(sm.owner, sm.kind)
		switch {
		case !ok || !x.ok:
			unknown++
			detail = append(detail, fmt.Sprintf("n%d:no answer", i))
		case there && left >= bound:
			hold++
			detail = append(detail, fmt.Sprintf("n%d:ok left=%v", i, left))
		case c.excused(i, sm.owner):
			unknown++
			detail = append(detail, fmt.Sprintf("n%d:lost keys (restart, eviction)", i))
		default:
			bad++
			v := "none"
			switch {
			case there:
				v = "ours"
			case x.other(sm.owner):
				v = "other"
			case x.typ == "hash":
				v = "no live entry"
			}
			detail = append(detail, fmt.Sprintf("n%d:%s %s left=%v<%v", i, x.typ, v, left, bound))
		}
	}
	hist := strings.Join(c.owners[sm.owner].history, "; ")
	c.mu.Unlock()
	if debug {
		c.t.Logf("judge %q %s r=%v bad=%d: %s", sm.key, short(sm.owner), sm.remain, bad, strings.Join(detail, " "))
	}
	if bad > len(c.nodes)-c.need {
		if c.persisting(sm) {
			c.violation("persist "+sm.owner, "(1, still so after %v with no operation between) key %q owner %s: %s", persistAfter, sm.key, short(sm.owner), strings.Join(detail, " "))
		}
		c.violation(sm.owner, "(1) key %q owner %s reports held with %v left at %v, but only %d node(s) hold it that long (%d unknown): %s [history: %s]",
			sm.key, short(sm.owner), sm.remain.Round(time.Millisecond), c.rel(sm.t1), hold, unknown, strings.Join(detail, " "), hist)
	}
}

// read reads GET and PTTL of keys on every node at once, atomically per
// node (a script), each node bounded by a short timeout: a frozen node just
// gives no answer.
func (c *checker) read(keys map[string]bool) []map[string]reading {
	ks := make([]string, 0, len(keys))
	for k := range keys {
		ks = append(ks, k)
	}
	out := make([]map[string]reading, len(c.nodes))
	var wg sync.WaitGroup
	for i, a := range c.conns() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			res, err := readScript.Run(ctx, a, ks).Slice()
			at := time.Now()
			m := map[string]reading{}
			var now int64
			if err == nil && len(res) == 1+3*len(ks) {
				now, _ = res[0].(int64)
			}
			for j, k := range ks {
				if now == 0 {
					m[k] = reading{}
					continue
				}
				typ, _ := res[1+3*j].(string)
				v, _ := res[2+3*j].(string)
				var fields map[string]string
				if all, ok := res[2+3*j].([]any); ok {
					fields = map[string]string{}
					for f := 0; f+1 < len(all); f += 2 {
						fk, _ := all[f].(string)
						fv, _ := all[f+1].(string)
						fields[fk] = fv
					}
				}
				d, _ := res[3+3*j].(int64)
				if d >= 0 {
					d *= int64(time.Millisecond)
				}
				m[k] = reading{ok: true, typ: typ, val: v, fields: fields, now: now, pttl: time.Duration(d), at: at}
			}
			out[i] = m
		}()
	}
	wg.Wait()
	return out
}

// excludes reports whether a and b, Locks of one key, may not be held at
// once: readers share with readers, the entries of one reentrant hold
// with each other; anything else (plain locks, permits, a writer, two
// holds, two types) excludes.
func excludes(a, b *rec) bool {
	switch {
	case a.kind == observe.KindRead && b.kind == observe.KindRead:
		return false
	case a.kind == observe.KindReentrant && b.kind == observe.KindReentrant:
		return a.hold != b.hold
	}
	return true
}

// overlaps applies (2) to every Lock registered so far.
func (c *checker) overlaps() {
	c.mu.Lock()
	by := map[string][]*rec{}
	sems := map[string][]*rec{}
	for _, r := range c.recs {
		if !r.last.Before(r.ret) {
			by[r.key] = append(by[r.key], r)
			if r.sem != "" {
				sems[r.sem] = append(sems[r.sem], r)
			}
		}
	}
	c.mu.Unlock()
	for sem, rs := range sems {
		c.permitsAtOnce(sem, rs)
	}
	for k, rs := range by {
		sort.Slice(rs, func(i, j int) bool { return rs[i].ret.Before(rs[j].ret) })
		for i := range rs {
			for j := 0; j < i; j++ {
				a, b := rs[j], rs[i] // a.ret <= b.ret
				if b.ret.Before(a.last) && excludes(a, b) {
					c.mu.Lock()
					ha, hb := strings.Join(c.owners[a.owner].history, "; "), strings.Join(c.owners[b.owner].history, "; ")
					c.mu.Unlock()
					c.violation(a.owner+" "+b.owner, "(2) key %q: %s %s held over [%v, %v] and %s %s over [%v, %v]: both held for %v [history of %s: %s] [history of %s: %s]",
						k, a.client, short(a.owner), c.rel(a.ret), c.rel(a.last), b.client, short(b.owner), c.rel(b.ret), c.rel(b.last),
						earlier(a.last, b.last).Sub(b.ret).Round(time.Microsecond), short(a.owner), ha, short(b.owner), hb)
				}
			}
		}
	}
}

// permitsAtOnce applies (2) to the Locks of one semaphore: each on one of
// its permits' keys, at most n of them held at once. The most intervals
// held at one instant are held at the start of one of them: for each b,
// the Locks held at b.ret are those with ret <= b.ret < last (the
// pairwise rule of overlaps).
func (c *checker) permitsAtOnce(sem string, rs []*rec) {
	sort.Slice(rs, func(i, j int) bool { return rs[i].ret.Before(rs[j].ret) })
	for _, r := range rs {
		ok := false
		for i := 0; i < r.permits; i++ {
			ok = ok || r.key == radmin.PermitKey(sem, i)
		}
		if !ok {
			c.violation("permit key "+r.owner, "(2) semaphore %q of %d permits: %s %s holds key %q, not one of its permits' keys", sem, r.permits, r.client, short(r.owner), r.key)
		}
	}
	for i, b := range rs {
		at := []*rec{b}
		for _, a := range rs[:i] {
			if b.ret.Before(a.last) {
				at = append(at, a)
			}
		}
		if len(at) <= b.permits {
			continue
		}
		var who, desc []string
		for _, a := range at {
			who = append(who, a.owner)
			desc = append(desc, fmt.Sprintf("%s %s %q over [%v, %v]", a.client, short(a.owner), a.key, c.rel(a.ret), c.rel(a.last)))
		}
		sort.Strings(who)
		c.violation("semaphore "+strings.Join(who, " "), "(2) semaphore %q of %d permits: %d Locks held at %v: %s",
			sem, b.permits, len(at), c.rel(b.ret), strings.Join(desc, "; "))
	}
}

// tally counts one event of the workload for the summary.
func (c *checker) tally(what string) {
	c.mu.Lock()
	if c.tallies == nil {
		c.tallies = map[string]int{}
	}
	c.tallies[what]++
	c.mu.Unlock()
}

// kinds summarizes the Locks registered: how many of each type, and how
// many of the reentrant ones entered a hold made before them.
func (c *checker) kinds() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := map[observe.Kind]int{}
	entries := 0
	for _, r := range c.recs {
		n[r.kind]++
		if r.kind == observe.KindReentrant && r.hold != r.owner {
			entries++
		}
	}
	return fmt.Sprintf("%v (%d reentrant entries of an earlier hold), calls %v", n, entries, c.tallies)
}

// byClient returns how many locks each Client (by its workload name) took.
func (c *checker) byClient() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := map[string]int{}
	for _, r := range c.recs {
		n[r.client]++
	}
	return n
}

// failed counts an acquisition (Lock, TryLock) of the workload's Client
// client that failed at ret, by the error's class.
func (c *checker) failed(client string, err error, ret time.Time) {
	class := "other"
	var q *redlock.QuorumError
	switch {
	case errors.Is(err, redlock.ErrClosed):
		class = "closed"
	case errors.As(err, &q) && errors.Is(err, context.DeadlineExceeded):
		class = "quorum+deadline"
	case errors.As(err, &q):
		class = "quorum"
	case errors.Is(err, context.DeadlineExceeded):
		class = "deadline"
	case errors.Is(err, redlock.ErrNotObtained):
		class = "not obtained"
	}
	c.mu.Lock()
	c.fails = append(c.fails, failure{class, ret, err.Error(), client, q})
	c.mu.Unlock()
}

type failure struct {
	class  string
	at     time.Time
	msg    string
	client string
	q      *redlock.QuorumError // nil unless the error is one
}

// causes says what kept client's failed acquisitions from a quorum: how
// many failed, the classes of their errors, and what the nodes of their
// last rounds answered (held elsewhere, timed out, quarantined, not
// waited for, an error reply by its first word such as NOPERM, ...).
func (c *checker) causes(client string) (failed int, classes, nodes map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	classes, nodes = map[string]int{}, map[string]int{}
	for _, f := range c.fails {
		if f.client != client {
			continue
		}
		failed++
		classes[f.class]++
		if f.q == nil {
			continue
		}
		for _, n := range f.q.Nodes {
			nodes[nodeCause(n)]++
		}
	}
	return failed, classes, nodes
}

// nodeCause names what one node's vote came to in a round.
func nodeCause(n observe.NodeResult) string {
	var re redis.Error
	switch {
	case n.Err == nil && n.Vote && n.Discounted != nil:
		return "yes not counted"
	case n.Err == nil && n.Vote:
		return "yes"
	case n.Err == nil:
		return "held elsewhere"
	case errors.Is(n.Err, observe.ErrPending):
		return "not waited for"
	case errors.Is(n.Err, observe.ErrNodeQuarantined):
		return "quarantined"
	case errors.As(n.Err, &re):
		return "error reply " + strings.Fields(re.Error() + " ?")[0]
	case n.Timeout():
		return "timed out"
	}
	return "other error"
}

// failures is how many acquisitions failed in each window of w since
// start, by class.
func (c *checker) failures(start time.Time, w time.Duration) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := map[string][]int{}
	var eg []string
	for _, f := range c.fails {
		i := int(f.at.Sub(start) / w)
		if len(eg) <= i {
			eg = append(eg, make([]string, i+1-len(eg))...)
		}
		if eg[i] == "" && strings.HasPrefix(f.class, "quorum") {
			eg[i] = f.msg
		}
		for len(n[f.class]) <= i {
			n[f.class] = append(n[f.class], 0)
		}
		n[f.class][i]++
	}
	return fmt.Sprintf("%v; the first quorum error of each window:\n  %s", n, strings.Join(eg, "\n  "))
}

// perKey is how many Locks of each key (a semaphore's under its key) were
// acquired in each window of w since start: a key no one gets for long
// shows there.
func (c *checker) perKey(start time.Time, w time.Duration) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := map[string][]int{}
	for _, r := range c.recs {
		k := r.key
		if r.sem != "" {
			k = r.sem
		}
		i := int(r.ret.Sub(start) / w)
		for len(n[k]) <= i {
			n[k] = append(n[k], 0)
		}
		n[k][i]++
	}
	ks := make([]string, 0, len(n))
	for k := range n {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var out []string
	for _, k := range ks {
		out = append(out, fmt.Sprintf("%s %v", k, n[k]))
	}
	return strings.Join(out, ", ")
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

var epoch = time.Now()

func (c *checker) rel(t time.Time) time.Duration { return t.Sub(epoch).Round(time.Microsecond) }

func short(o string) string {
	if len(o) > 8 { // the attempt's random part, after the Client's id
		return o[len(o)-8:]
	}
	return o
}

// verify checks l once, now, by (1); the caller has no operation in flight
// on it. It returns the violation, or "" (also when l does not report held).
func (c *checker) verify(l *redlock.Lock) string {
	before := c.count.Load()
	c.mu.Lock()
	n := len(c.found)
	c.mu.Unlock()
	c.check([]*redlock.Lock{l})
	if c.count.Load() == before {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.found) > n {
		return c.found[n]
	}
	return "violation (as before, same owner value)"
}

// delAll deletes key on every node behind the library's back.
func (c *checker) delAll(t testing.TB, key string) {
	t.Helper()
	for i, a := range c.conns() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := a.Del(ctx, key).Err()
		cancel()
		if err != nil {
			t.Fatalf("DEL on node %d: %v", i, err)
		}
	}
}

var debug = os.Getenv("INVARIANT_DEBUG") != ""
