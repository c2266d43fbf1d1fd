package trust_test

import (
	"strconv"
	"time"

	"github.com/redlock-go/redlock/internal/trust"
)

// The simulated Redis nodes: one address each, whose process, data and
// append-only file change under the faults of the schedule.

const (
	nKeys    = 2 // lock keys
	nBuckets = 3 // TTL register buckets: 1 s, 5 s, 20 s
	factor   = 0.01

	aofOff      = 0
	aofEverysec = 1
	aofAlways   = 2

	// eviction targets beyond the lock keys
	evictRegister = nKeys
	evictStamp    = nKeys + 1
)

// bucketTTL is the TTL of register bucket b.
func bucketTTL(b int) time.Duration {
	switch b {
	case 0:
		return time.Second
	case 1:
		return 5 * time.Second
	}
	return 20 * time.Second
}

// bucketOf is the bucket of ttl (one of bucketTTL's).
func bucketOf(ttl time.Duration) int {
	for b := 0; b < nBuckets-1; b++ {
		if ttl <= bucketTTL(b) {
			return b
		}
	}
	return nBuckets - 1
}

// budget is the drift budget of a duration d.
func budget(d time.Duration) time.Duration {
	return time.Duration(float64(d)*factor) + 2*time.Millisecond
}

// needMS and holdMS are the guard's register arguments (node.guardArgs): the
// entry must outlive the lock by need from now, else it is raised to hold.
func needMS(b int) int64 {
	return (time.Duration(float64(bucketTTL(b)+time.Second)/(1-factor)) + time.Millisecond).Milliseconds()
}

func holdMS(b int) int64 {
	d := bucketTTL(b)
	return (time.Duration(float64(d+min(d, 10*time.Second)+time.Second)/(1-factor)) + time.Millisecond).Milliseconds()
}

// clock runs at rate against true time, from off.
type clock struct {
	off  time.Duration
	rate float64
}

func (c clock) read(t time.Duration) time.Duration {
	return c.off + time.Duration(float64(t)*c.rate)
}

// lockKey is a lock key: owner 0 is absent; it lives while now <= exp
// (node ms), as Redis expires keys.
type lockKey struct {
	owner uint64
	exp   int64
}

// store is a node's data: lock keys, the TTL register (entry expiries in
// node ms per bucket, plain then durable; 0 absent) and its stamp.
type store struct {
	locks     [nKeys]lockKey
	reg       [2 * nBuckets]int64
	aof, prev string
}

// snap is a state of a node's data at true time t, its seq'th write.
type snap struct {
	t   time.Duration
	seq int
	s   store
}

// proc is one server process at a node's address.
type proc struct {
	run        string
	start      time.Duration // true time
	promoted   bool          // a replica promoted in this life
	replicated bool          // it has or fed a replica (INFO repl_backlog_active)
	evicted    int64
	mem        store
	log        []snap // mem over this life: what a lagging replica copied
}

// node is one node's address: the process that answers there, its
// configuration and its append-only file.
type node struct {
	clk     clock
	aof     int
	evicts  bool
	replica bool          // a replica is attached
	attach  time.Duration // when it synced
	p       proc
	disk    []snap // the append-only file's states (AOF on)
	synced  int    // seq surely on disk (WAITAOF, appendfsync always)
	seq     int
}

func (n *node) ms(t time.Duration) int64 { return n.clk.read(t).Milliseconds() }

// write records the process's data after a write.
func (n *node) write(t time.Duration) {
	n.seq++
	sn := snap{t, n.seq, n.p.mem}
	n.p.log = append(n.p.log, sn)
	if n.aof != aofOff {
		n.disk = append(n.disk, sn)
	}
	if n.aof == aofAlways {
		n.synced = n.seq
	}
}

// start runs a new process with data s, its append-only file the first
// keep states of the old one's, then s.
func (n *node) start(t, began time.Duration, run string, s store, keep int) {
	n.p = proc{run: run, start: began, replicated: n.replica, mem: s}
	n.seq++
	n.p.log = []snap{{t, n.seq, s}}
	n.disk = append(n.disk[:keep:keep], snap{t, n.seq, s})
	n.synced = n.seq
}

// kept is what the append-only file holds after a crash at t: every
// acknowledged write (always), the writes older than a second or
// confirmed by WAITAOF and those of the next cut ms (everysec), nothing
// (off). It returns the index in n.disk.
func (n *node) kept(t time.Duration, cut int) int {
	if n.aof == aofAlways {
		return len(n.disk) - 1
	}
	i := 0
	for j, sn := range n.disk {
		if sn.t <= t-time.Second+time.Duration(cut)*time.Millisecond || sn.seq <= n.synced {
			i = j
		}
	}
	return i
}

// restart ends the process and starts another at t: mode 0 loads what the
// append-only file kept, 1 loses it, 2 loads an older copy (the file as it
// was age ago, perhaps in an earlier life).
func (n *node) restart(t time.Duration, run string, mode, cut int, age time.Duration) {
	i := -1
	if n.aof != aofOff && mode != 1 {
		i = n.kept(t, cut)
		for mode == 2 && i >= 0 && n.disk[i].t > t-age {
			i--
		}
	}
	var s store
	if i >= 0 {
		s = n.disk[i].s
	}
	n.start(t, t, run, s, i+1)
}

// replace puts a new empty server with the same configuration at the address.
func (n *node) replace(t time.Duration, run string) {
	n.replica = false
	n.start(t, t, run, store{}, 0)
}

// failover promotes the replica: its data is the primary's as of lag ago
// (not before it synced), stamp included; it started age before it synced.
func (n *node) failover(t time.Duration, run string, lag, age time.Duration) bool {
	if !n.replica {
		return false
	}
	at, s := max(n.attach, t-lag), n.p.log[0].s
	for _, sn := range n.p.log {
		if sn.t <= at {
			s = sn.s
		}
	}
	n.replica = false
	n.start(t, n.attach-age, run, s, 0)
	n.p.promoted, n.p.replicated = true, true // a replica keeps a backlog
	return true
}

// attachReplica attaches a replica to the node at t.
func (n *node) attachReplica(t time.Duration) {
	if !n.replica {
		n.replica, n.attach, n.p.replicated = true, t, true
	}
}

// evict evicts target (a lock key, the register or the stamp) if the node
// may evict and the key is there.
func (n *node) evict(t time.Duration, target int) bool {
	now, m := n.ms(t), &n.p.mem
	switch {
	case !n.evicts:
		return false
	case target < nKeys:
		if m.locks[target].owner == 0 || now > m.locks[target].exp {
			return false
		}
		m.locks[target] = lockKey{}
	case target == evictRegister:
		if !liveReg(m, now) {
			return false
		}
		m.reg = [2 * nBuckets]int64{}
	default:
		if m.aof == "" {
			return false
		}
		m.aof, m.prev = "", ""
	}
	n.p.evicted++
	n.write(t)
	return true
}

func liveReg(m *store, now int64) bool {
	for _, e := range m.reg {
		if e > now {
			return true
		}
	}
	return false
}

// identity is what an identity read shows: the process, the node's own
// register (live entries, Left on the node's clock) and its stamp.
func (n *node) identity(t time.Duration) (trust.Proc, []trust.Entry, [2]string) {
	up := n.clk.read(t)/time.Second - n.clk.read(n.p.start)/time.Second // INFO: two whole-second readings
	p := trust.Proc{RunID: n.p.run, Uptime: up * time.Second, AOF: n.aof != aofOff, Fsync: n.aof == aofAlways,
		Promoted: n.p.promoted, Replicated: n.p.replicated, Evicts: n.evicts, Evicted: n.p.evicted}
	now, m := n.ms(t), &n.p.mem
	var es []trust.Entry
	for f, e := range m.reg {
		if e > now {
			es = append(es, trust.Entry{TTL: bucketTTL(f % nBuckets), Left: time.Duration(e-now) * time.Millisecond, Durable: f >= nBuckets})
		}
	}
	return p, es, [2]string{m.aof, m.prev}
}

// binding is what a Client's guarded commands on a node are bound to.
type binding struct {
	run     string
	evicted int64
	blind   bool // T4 reverted: the count is never checked
}

type reply int

const (
	no reply = iota
	yes
	refused
)

// guard is the process and eviction check of the grant script.
func (n *node) guard(b binding) bool {
	return n.p.run == b.run && (b.blind || n.p.evicted == b.evicted)
}

// raise makes the register entry of bucket bk (durable d) outlive a lock
// granted now, as the guard does before it grants (guard.lua); always
// raises unconditionally (a publish). It reports true.
func (n *node) raise(t time.Duration, b binding, bk int, d, always bool) bool {
	now, m := n.ms(t), &n.p.mem
	f := bk
	if d {
		f += nBuckets
	}
	if !always && m.reg[f] >= now+needMS(bk) {
		return true
	}
	m.reg[f] = max(m.reg[f], now+holdMS(bk))
	for i, e := range m.reg {
		if e <= now {
			m.reg[i] = 0
		}
	}
	return true
}

// stamp names the process in its data, the one named before as prev.
func (n *node) stamp() {
	if m := &n.p.mem; m.aof != n.p.run {
		m.aof, m.prev = n.p.run, m.aof
	}
}

// guarded is the guard's part of a grant script: the process and
// eviction checks, the register (unless noRaise: the Client published
// it) and the stamp. It reports false for a refusal.
func (n *node) guarded(t time.Duration, b binding, ttl time.Duration, d, noRaise bool) bool {
	if !n.guard(b) || !noRaise && !n.raise(t, b, bucketOf(ttl), d, false) {
		return false
	}
	n.stamp()
	return true
}

// grant is the guarded SET NX PX.
func (n *node) grant(t time.Duration, b binding, k int, owner uint64, ttl time.Duration, d, noRaise bool) reply {
	if !n.guarded(t, b, ttl, d, noRaise) {
		return refused
	}
	now, m := n.ms(t), &n.p.mem
	r := no
	if m.locks[k].owner == 0 || now > m.locks[k].exp {
		m.locks[k], r = lockKey{owner, now + ttl.Milliseconds()}, yes
	}
	n.write(t)
	return r
}

// extend is the guarded compare-and-pexpire.
func (n *node) extend(t time.Duration, b binding, k int, owner uint64, ttl time.Duration, d, noRaise bool) reply {
	if !n.guarded(t, b, ttl, d, noRaise) {
		return refused
	}
	now, m := n.ms(t), &n.p.mem
	r := no
	if m.locks[k].owner == owner && now <= m.locks[k].exp {
		m.locks[k].exp, r = now+ttl.Milliseconds(), yes
	}
	n.write(t)
	return r
}

// release is the compare-and-delete.
func (n *node) release(t time.Duration, k int, owner uint64) {
	if m := &n.p.mem; m.locks[k].owner == owner {
		m.locks[k] = lockKey{}
		n.write(t)
	}
}

// confirm is WAITAOF after a write: whether it is on disk.
func (n *node) confirm() bool {
	switch n.aof {
	case aofAlways:
		return true
	case aofEverysec:
		n.synced = n.seq
		return true
	}
	return false
}

func runName(i int) string { return "r" + strconv.Itoa(i) }
