package invariant

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
)

// checker checks the library's promise from outside, through the public
// API and direct reads of the nodes:
//
//  1. a Lock that reports held (Err() == nil, Remaining() = r > 0) while no
//     operation of the workload is in flight on its owner value is held
//     on the nodes: fewer than N-quorum nodes may answer that they do not
//     hold its owner with PTTL >= r - elapsed - 1 ms (a node that does not
//     answer, or that restarted empty since the owner was acquired, is
//     not counted against it);
//  2. no two Locks of one key report held at the same instant.
//
// For (2) every Lock has a definitely-held interval [ret, last]: ret is
// read after Lock returned it (held then), last before a call of Err that
// returned nil (held then); a Lock that ended never holds again, so it was
// held in between. Two such intervals of one key that overlap are two
// holders at once.
type checker struct {
	t     testing.TB
	nodes []*harness.Node
	admin []*redis.Client
	need  int
	// silent: violations are not logged as found; the test judges what
	// verify returns (focused tests that also break the model on purpose).
	silent bool

	mu       sync.Mutex
	owners   map[string]*ownerState
	recs     []*rec
	live     map[*redlock.Lock]*rec
	restarts [][]time.Time // per node: when each empty restart ended
	found    []string      // violations, the first of each owner value
	seen     map[string]bool
	count    atomic.Int64 // violations
	samples  atomic.Int64 // checks of kind (1) that compared against the nodes
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
	ret, last time.Time // definitely held over [ret, last] (last < ret: never seen held after ret)
}

func newChecker(t testing.TB, nodes []*harness.Node) *checker {
	c := &checker{t: t, nodes: nodes, need: len(nodes)/2 + 1, owners: map[string]*ownerState{},
		live: map[*redlock.Lock]*rec{}, seen: map[string]bool{}, restarts: make([][]time.Time, len(nodes))}
	for _, n := range nodes {
		c.admin = append(c.admin, redis.NewClient(&redis.Options{Addr: n.Addr, ContextTimeoutEnabled: true,
			DialTimeout: 250 * time.Millisecond, ReadTimeout: 250 * time.Millisecond, WriteTimeout: 250 * time.Millisecond,
			MaxRetries: -1, PoolSize: 16}))
	}
	t.Cleanup(func() {
		for _, a := range c.admin {
			_ = a.Close()
		}
	})
	return c
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
	c.mu.Lock()
	s := c.owner(l.Owner())
	if s.acqCall.IsZero() || call.Before(s.acqCall) {
		s.acqCall = call
	}
	r := &rec{l: l, key: l.Key(), owner: l.Owner(), client: client, ret: ret}
	c.recs = append(c.recs, r)
	c.live[l] = r
	c.mu.Unlock()
	c.check([]*redlock.Lock{l})
}

// restarting records that node i is about to restart empty; restarted,
// that it is up again.
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

// excused: node i may have lost owner's keys in an empty restart (one
// that was still going on, or that ended, after owner's acquisition
// began). c.mu must be held.
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

// readScript reads GET and PTTL of every key at one instant of the node.
var readScript = redis.NewScript(`local r = {}
for _, k in ipairs(KEYS) do
  r[#r + 1] = redis.call('GET', k) or ''
  r[#r + 1] = redis.call('PTTL', k)
end
return r`)

// reading is one node's answer for one key.
type reading struct {
	ok   bool // the node answered
	val  string
	pttl time.Duration
	at   time.Time // after the answer arrived
}

type sample struct {
	l      *redlock.Lock
	owner  string
	key    string
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
		sm := sample{l: l, owner: l.Owner(), key: l.Key(), epoch: s.epoch, quiet: s.inflight == 0}
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
		bound := sm.claim.Sub(x.at) - time.Millisecond
		switch {
		case !ok || !x.ok:
			unknown++
			detail = append(detail, fmt.Sprintf("n%d:no answer", i))
		case x.val == sm.owner && x.pttl >= bound:
			hold++
			detail = append(detail, fmt.Sprintf("n%d:ok pttl=%v", i, x.pttl))
		case c.excused(i, sm.owner):
			unknown++
			detail = append(detail, fmt.Sprintf("n%d:restarted empty", i))
		default:
			bad++
			v := "other"
			if x.val == "" {
				v = "none"
			} else if x.val == sm.owner {
				v = "ours"
			}
			detail = append(detail, fmt.Sprintf("n%d:%s pttl=%v<%v", i, v, x.pttl, bound))
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
	for i, a := range c.admin {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			res, err := readScript.Run(ctx, a, ks).Slice()
			at := time.Now()
			m := map[string]reading{}
			for j, k := range ks {
				if err != nil || len(res) != 2*len(ks) {
					m[k] = reading{}
					continue
				}
				v, _ := res[2*j].(string)
				d, _ := res[2*j+1].(int64)
				if d >= 0 {
					d *= int64(time.Millisecond)
				}
				m[k] = reading{ok: true, val: v, pttl: time.Duration(d), at: at}
			}
			out[i] = m
		}()
	}
	wg.Wait()
	return out
}

// overlaps applies (2) to every Lock registered so far.
func (c *checker) overlaps() {
	c.mu.Lock()
	by := map[string][]*rec{}
	for _, r := range c.recs {
		if !r.last.Before(r.ret) {
			by[r.key] = append(by[r.key], r)
		}
	}
	c.mu.Unlock()
	for k, rs := range by {
		sort.Slice(rs, func(i, j int) bool { return rs[i].ret.Before(rs[j].ret) })
		for i := range rs {
			for j := 0; j < i; j++ {
				a, b := rs[j], rs[i] // a.ret <= b.ret
				if b.ret.Before(a.last) {
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
	for i, a := range c.admin {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := a.Del(ctx, key).Err()
		cancel()
		if err != nil {
			t.Fatalf("DEL on node %d: %v", i, err)
		}
	}
}

var debug = os.Getenv("INVARIANT_DEBUG") != ""
