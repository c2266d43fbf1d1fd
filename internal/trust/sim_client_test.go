package trust_test

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/redlock-go/redlock/internal/trust"
	"github.com/redlock-go/redlock/observe"
)

// The simulated Clients: the library's flow around trust.Node (identify,
// Learn, Prove, Resolve, Counts) and the quorum rounds.

// setting is the deployment's fallback window (WithRestartQuarantine).
const setting = 30 * time.Second

// epoch is where the Clients' clocks start.
func epoch() time.Time { return time.Unix(1_700_000_000, 0) }

// variant is the rule set the Clients and nodes run.
type variant int

const (
	rulesInPlace   variant = iota
	revertT1               // a restart between two appendfsync always processes is exempt, stamp or not
	revertT2               // a new suspicion forgets the open window and trusts continuity evidence
	revertT4               // evicted_keys is never compared
	revertRegister         // a Client-side cache of published entries; the grant does not raise the register
	revertFresh            // a Client created while locks may be held does not run strict mode (A5)
	mixDurable             // one Client's votes are durable and the others' not, or the reverse (outside D3)
	nVariants
)

func (v variant) String() string {
	return [...]string{"rules in place", "T1 reverted", "T2 reverted", "T4 reverted", "register presence reverted", "strict mode off for new Clients",
		"durable and plain Clients mixed"}[v]
}

// pending is a suspicion whose registers are to be read.
type pending struct {
	i     int
	epoch uint64
	kept  bool
	run   string
	own   []trust.Entry
}

// client is one Client: its clock, its trust in each node, what its
// guarded commands are bound to, and the locks it holds.
type client struct {
	clk     clock
	created time.Time
	durable bool
	fresh   bool
	maxTTL  time.Duration
	nodes   []trust.Node
	bind    []binding
	known   []bool
	pend    []pending
	held    [nKeys]int // index in sim.holds; -1 none
	pub     [][2 * nBuckets]time.Time
	cut     []time.Duration // per node: unreachable until (true time)
}

func newClient(clk clock, created time.Time, durable, fresh bool, n int) client {
	c := client{clk: clk, created: created, durable: durable, fresh: fresh,
		nodes: make([]trust.Node, n), bind: make([]binding, n), known: make([]bool, n),
		pub: make([][2 * nBuckets]time.Time, n), cut: make([]time.Duration, n)}
	for k := range c.held {
		c.held[k] = -1
	}
	return c
}

func (c *client) time(t time.Duration) time.Time { return epoch().Add(c.clk.read(t)) }

// window is the fallback: the setting or the Client's longest TTL.
func (c *client) window() time.Duration { return max(setting, c.maxTTL) }

// loaded is node.Register.Loaded: the stamp shows that cur loaded prev's data.
func loaded(stamp [2]string, prev, cur string) bool {
	return prev != "" && (stamp[0] == prev || stamp[0] == cur && stamp[1] == prev)
}

// read is an identity read of node i by a Client, as the variant sees it.
func (s *sim) read(i int) (trust.Proc, []trust.Entry, [2]string) {
	p, es, st := s.nodes[i].identity(s.now)
	if s.v == revertT4 {
		p.Evicted = 0
	}
	return p, es, st
}

// identify reads node i's identity, learns it, binds the Client's
// commands to it and, if suspect, resolves it (now, or later if lazy).
func (s *sim) identify(c *client, i int, lazy bool) {
	p, own, stamp := s.read(i)
	s.learn(c, i, p, own, stamp, lazy)
	c.bind[i] = binding{run: p.RunID, evicted: p.Evicted, blind: s.v == revertT4}
	c.known[i] = true
}

// learn feeds an identity read to node i's trust, as the variant does.
func (s *sim) learn(c *client, i int, p trust.Proc, own []trust.Entry, stamp [2]string, lazy bool) {
	tn, now := &c.nodes[i], c.time(s.now)
	prev := tn.Proc
	e := trust.Seen{Proc: p, Loaded: loaded(stamp, prev.RunID, p.RunID), Now: now, Window: c.window(), Created: c.created, Fresh: c.fresh}
	restart := prev.RunID != "" && prev.RunID != p.RunID
	switch {
	case s.v == revertT1 && restart && prev.AOF && prev.Fsync && p.AOF && p.Fsync:
		e.Loaded = true
	case s.v == revertT2 && prev.RunID != "" && (restart || prev.Evicted != p.Evicted):
		tn.Pending, tn.Until, tn.Floor = false, time.Time{}, time.Time{}
	}
	v := tn.Learn(e)
	if v.Changed {
		c.pub[i] = [2 * nBuckets]time.Time{}
	}
	s.tracef("    identify n%d: %s up=%v evicted=%d promoted=%v replicated=%v stamp=%v loaded=%v -> suspect=%v changed=%v kept=%v",
		i, p.RunID, p.Uptime, p.Evicted, p.Promoted, p.Replicated, stamp, e.Loaded, v.Suspect, v.Changed, v.Kept)
	if v.Suspect {
		c.pend = append(c.pend, pending{i: i, epoch: v.Epoch, kept: v.Kept, run: p.RunID, own: own})
		if !lazy {
			s.resolve(c, c.pend[len(c.pend)-1])
		}
	}
}

// resolve reads the other nodes' identities and registers for suspicion
// p and resolves it. It reports whether p is settled (no longer current).
func (s *sim) resolve(c *client, p pending) bool {
	tn := &c.nodes[p.i]
	if !tn.Current(p.epoch) {
		return true
	}
	now, w := c.time(s.now), c.window()
	reads := make([]trust.Read, 0, len(s.nodes)-1)
	for j := range s.nodes {
		if j == p.i {
			continue
		}
		if !s.reach(c, j) {
			reads = append(reads, trust.Read{})
			continue
		}
		pj, es, _ := s.read(j)
		wit := c.nodes[j].Witness(pj, now, c.created, c.fresh, w)
		reads = append(reads, trust.Read{Read: true, Witness: wit, RunID: pj.RunID, Entries: es, At: now})
	}
	until, proven := trust.Prove(tn.Base, p.run, len(s.nodes), reads, budget, p.kept)
	proof := observe.BoundRegister
	if !proven && p.kept && c.durable && trust.AllDurable(p.own, 0, reads) {
		until, proven, proof = tn.Base, true, observe.BoundDurable
	}
	u, b, ok := tn.Resolve(trust.Resolution{Epoch: p.epoch, Proven: proven, Until: until, Proof: proof, Fallback: w, FBBound: observe.BoundSetting, Now: now})
	s.tracef("    resolve n%d epoch %d: proven=%v until=+%v -> +%v %s %v", p.i, p.epoch, proven, until.Sub(now), u.Sub(now), b, ok)
	return !tn.Current(p.epoch)
}

// background is the Client's resolver: it reads the registers again for
// every suspicion not settled (the library does every 250 ms).
func (s *sim) background(c *client) {
	keep := c.pend[:0]
	for _, p := range c.pend {
		if !s.resolve(c, p) {
			keep = append(keep, p)
		}
	}
	c.pend = keep
}

// counts reports whether node i's yes counts for Client c now: the trust
// gate, and the write confirmed on disk for durable votes.
func (s *sim) counts(c *client, i int, now time.Time) bool {
	if c.durable && !s.nodes[i].confirm() {
		return false
	}
	ok, _ := c.nodes[i].Counts(now)
	return ok
}

// send sends a grant (or an extension) to node i, identifying it first
// when unknown and again when the guard refuses.
func (s *sim) send(c *client, i, k int, owner uint64, ttl time.Duration, ext, lazy bool) reply {
	if !c.known[i] {
		s.identify(c, i, lazy)
	}
	nd, b, noRaise := &s.nodes[i], c.bind[i], s.v == revertRegister
	if noRaise {
		s.publish(c, i, ttl)
	}
	var r reply
	if ext {
		r = nd.extend(s.now, b, k, owner, ttl, c.durable, noRaise)
	} else {
		r = nd.grant(s.now, b, k, owner, ttl, c.durable, noRaise)
	}
	if r == refused {
		s.identify(c, i, lazy)
	}
	return r
}

// publish is the reverted register presence: the Client raises the entry
// only where its record of what it published says it is due.
func (s *sim) publish(c *client, i int, ttl time.Duration) {
	bk := bucketOf(ttl)
	f := bk
	if c.durable {
		f += nBuckets
	}
	now := c.time(s.now)
	if !c.pub[i][f].Before(now.Add(ttl)) {
		return
	}
	s.nodes[i].raise(s.now, c.bind[i], bk, c.durable, true)
	s.nodes[i].stamp()
	s.nodes[i].write(s.now)
	h := time.Duration(holdMS(bk)) * time.Millisecond
	c.pub[i][f] = now.Add(h - budget(h))
}

// round sends a grant (or extension) of k with ttl to every node the
// Client reaches and returns the nodes whose yes counted.
func (s *sim) round(c *client, k int, owner uint64, ttl time.Duration, ext, lazy bool) uint32 {
	s.background(c)
	c.maxTTL = max(c.maxTTL, ttl)
	now, counted := c.time(s.now), uint32(0)
	for i := range s.nodes {
		if !s.reach(c, i) {
			continue
		}
		if s.send(c, i, k, owner, ttl, ext, lazy) == yes && s.counts(c, i, now) {
			counted |= 1 << i
			s.promise(i, k, owner)
		}
	}
	return counted
}

// quorum reports whether a round's counted votes hold a lock of ttl.
func (s *sim) quorum(counted uint32, ttl time.Duration) bool {
	return bits.OnesCount32(counted) >= len(s.nodes)/2+1 && ttl > budget(ttl)
}

// acquire is a lock attempt: held on a quorum of counted yes votes with a
// positive validity; else released everywhere.
func (s *sim) acquire(ci, k int, ttl time.Duration, lazy bool) {
	c := &s.clients[ci]
	s.owners++
	owner := s.owners
	counted := s.round(c, k, owner, ttl, false, lazy)
	if !s.quorum(counted, ttl) { // the round takes no time: validity is ttl - budget(ttl)
		s.tracef("    c%d failed on k%d (counted %b)", ci, k, counted)
		s.releaseAll(c, k, owner)
		return
	}
	h := hold{c: ci, k: k, owner: owner, ttl: ttl, quorum: counted, start: s.now, end: s.now + c.valid(ttl)}
	s.holds = append(s.holds, h)
	c.held[k] = len(s.holds) - 1
	s.tracef("    c%d holds k%d until %v (counted %b)", ci, k, h.end, counted)
	s.check(len(s.holds) - 1)
}

// valid is how long a lock of ttl is valid in true time.
func (c *client) valid(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl-budget(ttl)) / c.clk.rate)
}

// extend lengthens Client ci's lock on k by its TTL, while valid, from
// now (the same TTL: a PEXPIRE never shortens the keys).
func (s *sim) extend(ci, k int, lazy bool) {
	c := &s.clients[ci]
	hi := c.held[k]
	if hi < 0 || s.now >= s.holds[hi].end {
		return
	}
	h := &s.holds[hi]
	counted := s.round(c, k, h.owner, h.ttl, true, lazy)
	if !s.quorum(counted, h.ttl) {
		s.tracef("    c%d extension of k%d failed (counted %b)", ci, k, counted)
		return
	}
	h.end, h.quorum = s.now+c.valid(h.ttl), counted
	s.tracef("    c%d extended k%d until %v (counted %b)", ci, k, h.end, counted)
	s.check(hi)
}

// unlock releases Client ci's lock on k.
func (s *sim) unlock(ci, k int) {
	c := &s.clients[ci]
	hi := c.held[k]
	if hi < 0 {
		return
	}
	s.releaseAll(c, k, s.holds[hi].owner)
	s.holds[hi].end = min(s.holds[hi].end, s.now)
	c.held[k] = -1
}

func (s *sim) releaseAll(c *client, k int, owner uint64) {
	for i := range s.nodes {
		if s.reach(c, i) {
			s.nodes[i].release(s.now, k, owner)
		}
	}
}

// hold is one holder's interval in true time.
type hold struct {
	c, k       int
	owner      uint64
	ttl        time.Duration
	quorum     uint32 // the nodes whose yes counted in its latest round
	start, end time.Duration
}

func (h hold) String() string {
	return fmt.Sprintf("c%d k%d [%v, %v]", h.c, h.k, h.start, h.end)
}
