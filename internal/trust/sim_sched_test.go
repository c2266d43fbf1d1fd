package trust_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Schedules: a configuration and a list of events, generated from a seed
// or written out (regress_test.go), and the simulation that runs them.

// config is a deployment: per node its persistence, eviction policy,
// replica, initial stamp, uptime and clock; per Client its clock and
// durable votes.
type config struct {
	AOF       []int
	Evicts    []bool
	Replica   []bool
	Stamped   []bool          // the first process's data carries its stamp
	Up        []time.Duration // the first process's uptime at time 0
	NodeClk   []clock
	ClientClk []clock
	Durable   []bool
	Age       []time.Duration // the Client's age at time 0: more than INFO's second
}

type kind int

const (
	evGrant         kind = iota // C tries K with TTL (X 1: its suspicions resolve later)
	evRelease                   // C releases K
	evExtend                    // C extends K (X 1: lazy)
	evAdvance                   // true time passes by D
	evPartition                 // C reaches no node of mask X for D
	evClientRestart             // C starts afresh
	evRestart                   // node I restarts: X 0 AOF kept (and Y ms of the unsynced second), 1 AOF lost, 2 AOF as it was D ago
	evReplace                   // node I is a new empty server, same configuration
	evFailover                  // node I's replica, D behind and started Y s before it synced, is promoted
	evAttach                    // a replica syncs from node I
	evEvict                     // node I evicts key X (lock keys, then register, stamp)
)

// event is one step of a schedule; which fields count depends on Kind.
type event struct {
	Kind    kind
	C, I, K int
	TTL, D  time.Duration
	X, Y    int
}

type schedule struct {
	cfg    config
	events []event
}

func (e event) String() string {
	switch e.Kind {
	case evGrant:
		return fmt.Sprintf("grant c%d k%d %v%s", e.C, e.K, e.TTL, lazy(e.X))
	case evRelease:
		return fmt.Sprintf("release c%d k%d", e.C, e.K)
	case evExtend:
		return fmt.Sprintf("extend c%d k%d%s", e.C, e.K, lazy(e.X))
	case evAdvance:
		return fmt.Sprintf("advance %v", e.D)
	case evPartition:
		return fmt.Sprintf("partition c%d from nodes %b for %v", e.C, e.X, e.D)
	case evClientRestart:
		return fmt.Sprintf("client c%d restarts", e.C)
	case evRestart:
		return fmt.Sprintf("restart n%d %s", e.I, [...]string{fmt.Sprintf("AOF kept (and %dms of the unsynced second)", e.Y), "AOF lost", fmt.Sprintf("AOF from %v ago", e.D)}[e.X])
	case evReplace:
		return fmt.Sprintf("replace n%d by an empty server", e.I)
	case evFailover:
		return fmt.Sprintf("fail-over n%d to a replica %v behind (started %ds before it synced)", e.I, e.D, e.Y)
	case evAttach:
		return fmt.Sprintf("replica attaches to n%d", e.I)
	}
	return fmt.Sprintf("evict n%d %s", e.I, [...]string{"k0", "k1", "register", "stamp"}[e.X])
}

func lazy(x int) string {
	if x == 1 {
		return " (lazy)"
	}
	return ""
}

// goString writes the schedule as a Go literal for regress_test.go.
func (sc schedule) goString() string {
	var b strings.Builder
	c := sc.cfg
	fmt.Fprintf(&b, "schedule{config{AOF: %#v, Evicts: %#v, Replica: %#v, Stamped: %#v,\n\tUp: %s, NodeClk: %s,\n\tClientClk: %s, Durable: %#v, Age: %s},\n\t[]event{\n",
		c.AOF, c.Evicts, c.Replica, c.Stamped, durs(c.Up), clocks(c.NodeClk), clocks(c.ClientClk), c.Durable, durs(c.Age))
	names := [...]string{"evGrant", "evRelease", "evExtend", "evAdvance", "evPartition", "evClientRestart", "evRestart", "evReplace", "evFailover", "evAttach", "evEvict"}
	for _, e := range sc.events {
		f := []string{"Kind: " + names[e.Kind]}
		for _, x := range []struct {
			n string
			v int
		}{{"C", e.C}, {"I", e.I}, {"K", e.K}, {"X", e.X}, {"Y", e.Y}} {
			if x.v != 0 {
				f = append(f, fmt.Sprintf("%s: %d", x.n, x.v))
			}
		}
		for _, x := range []struct {
			n string
			d time.Duration
		}{{"TTL", e.TTL}, {"D", e.D}} {
			if x.d != 0 {
				f = append(f, x.n+": "+goDur(x.d))
			}
		}
		fmt.Fprintf(&b, "\t\t{%s}, // %v\n", strings.Join(f, ", "), e)
	}
	b.WriteString("\t}}")
	return b.String()
}

// goDur writes d as a Go expression.
func goDur(d time.Duration) string {
	switch {
	case d%time.Second == 0:
		return fmt.Sprintf("%d * time.Second", d/time.Second)
	case d%time.Millisecond == 0:
		return fmt.Sprintf("%d * time.Millisecond", d/time.Millisecond)
	}
	return fmt.Sprint(int64(d))
}

func durs(ds []time.Duration) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = goDur(d)
	}
	return "[]time.Duration{" + strings.Join(s, ", ") + "}"
}

func clocks(cs []clock) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = fmt.Sprintf("{%s, %v}", goDur(c.off), c.rate)
	}
	return "[]clock{" + strings.Join(s, ", ") + "}"
}

// pick returns an index drawn with the weights w.
func pick(r *rand.Rand, w ...int) int {
	sum := 0
	for _, x := range w {
		sum += x
	}
	n := r.IntN(sum)
	for i, x := range w {
		if n < x {
			return i
		}
		n -= x
	}
	return len(w) - 1
}

func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)/1e6+1))*time.Millisecond
}

func rate(r *rand.Rand) float64 { return 0.995 + float64(r.IntN(101))/10000 }

// genConfig draws a deployment of 3 or 5 nodes and 2 or 3 Clients.
func genConfig(r *rand.Rand) config {
	n, m := 3+2*pick(r, 7, 3), 2+pick(r, 6, 4)
	c := config{AOF: make([]int, n), Evicts: make([]bool, n), Replica: make([]bool, n), Stamped: make([]bool, n),
		Up: make([]time.Duration, n), NodeClk: make([]clock, n), ClientClk: make([]clock, m), Durable: make([]bool, m), Age: make([]time.Duration, m)}
	for i := range n {
		c.AOF[i] = pick(r, 2, 3, 5)
		c.Evicts[i], c.Replica[i], c.Stamped[i] = r.IntN(10) < 3, r.IntN(10) < 3, r.IntN(2) == 0
		c.Up[i] = between(r, time.Minute, 240*time.Hour)
		c.NodeClk[i] = clock{between(r, 1e6*time.Second, 2e6*time.Second), rate(r)} // later than any start: whole seconds floor
	}
	durable := r.IntN(4) == 0 // D3: every Client or none
	for j := range m {
		c.ClientClk[j] = clock{between(r, 1000*time.Second, 100000*time.Second), rate(r)}
		c.Durable[j], c.Age[j] = durable, between(r, 2*time.Second, 50*time.Second)
	}
	return c
}

// gen draws the events of one schedule. Each schedule leaves out some
// kinds of events (swarm testing) and aims most faults at one node and
// most attempts at one key, so that compositions of a few faults on one
// node come often.
type gen struct {
	r       *rand.Rand
	c       config
	weights [evEvict + 1]int
	focus   int
	replica []bool // where a replica is attached
}

// genSchedule draws a deployment and 6 to -trust.events (12) events.
func genSchedule(r *rand.Rand) schedule {
	g := gen{r: r, c: genConfig(r), weights: [...]int{30, 5, 5, 17, 6, 3, 9, 4, 5, 3, 7}}
	g.focus, g.replica = r.IntN(len(g.c.AOF)), append([]bool(nil), g.c.Replica...)
	if r.IntN(4) != 0 {
		for k := evRelease; k <= evEvict; k++ {
			if r.IntN(3) == 0 {
				g.weights[k] = 0
			}
		}
	}
	sc := schedule{cfg: g.c, events: make([]event, 6+r.IntN(max(*flagEvents, 6)-5))}
	for j := range sc.events {
		sc.events[j] = g.event()
	}
	return sc
}

// node draws a node whose flag is want (any node if flags is nil), the
// focus more often than the others.
func (g *gen) node(flags []bool, want bool) int {
	if (flags == nil || flags[g.focus] == want) && g.r.IntN(3) != 0 {
		return g.focus
	}
	var ok []int
	for i := range g.c.AOF {
		if flags == nil || flags[i] == want {
			ok = append(ok, i)
		}
	}
	if len(ok) == 0 {
		return g.r.IntN(len(g.c.AOF))
	}
	return ok[g.r.IntN(len(ok))]
}

// event draws one event.
func (g *gen) event() event {
	r, n := g.r, len(g.c.AOF)
	e := event{Kind: kind(pick(r, g.weights[:]...)), C: r.IntN(len(g.c.ClientClk)), I: g.node(nil, false), K: pick(r, 8, 2)}
	switch e.Kind {
	case evGrant:
		e.TTL, e.X = bucketTTL(pick(r, 3, 3, 4)), pick(r, 4, 1)
	case evExtend:
		e.X = pick(r, 4, 1)
	case evAdvance:
		lo := [...]time.Duration{time.Millisecond, 200 * time.Millisecond, 3 * time.Second, 25 * time.Second}
		hi := [...]time.Duration{200 * time.Millisecond, 3 * time.Second, 25 * time.Second, 70 * time.Second}
		b := pick(r, 25, 35, 30, 10)
		e.D = between(r, lo[b], hi[b])
	case evPartition:
		e.X, e.D = 1+r.IntN(1<<n-1), between(r, 100*time.Millisecond, 40*time.Second)
	case evRestart:
		e.X, e.Y, e.D = pick(r, 5, 2, 3), r.IntN(1001), between(r, 0, time.Minute)
	case evFailover:
		if e.I = g.node(g.replica, true); !g.replica[e.I] {
			e.Kind = evAttach
			break
		}
		e.D, e.Y = between(r, 0, 10*time.Second), [...]int{r.IntN(30), 30 + r.IntN(3600)}[r.IntN(2)]
	case evEvict:
		e.I, e.X = g.node(g.c.Evicts, true), pick(r, 3, 2, 3, 1)
	}
	switch e.Kind {
	case evAttach:
		e.I = g.node(g.replica, false)
		g.replica[e.I] = true
	case evFailover, evReplace:
		g.replica[e.I] = false
	}
	return e
}

// sim is one run of a schedule.
type sim struct {
	v       variant
	out     int // what the model leaves out, let in (outside*)
	now     time.Duration
	nodes   []node
	clients []client
	holds   []hold
	runs    int
	owners  uint64
	broken  string // the first node that counted while it had lost a live lock
	double  string // the first double grant
	trace   func(string)
}

func newSim(c config, v variant, out int, trace func(string)) *sim {
	s := &sim{v: v, out: out, trace: trace, nodes: make([]node, len(c.AOF)), clients: make([]client, len(c.ClientClk))}
	for i := range s.nodes {
		nd := &s.nodes[i]
		nd.clk, nd.aof, nd.evicts, nd.replica, nd.attach = c.NodeClk[i], c.AOF[i], c.Evicts[i], c.Replica[i], -c.Up[i]
		var st store
		run := s.newRun()
		if c.Stamped[i] {
			st.aof = run
		}
		nd.start(0, -c.Up[i], run, st, 0)
	}
	for j := range s.clients {
		durable := c.Durable[j]
		if v == mixDurable && j == 0 {
			durable = !durable
		}
		s.clients[j] = newClient(c.ClientClk[j], epoch().Add(c.ClientClk[j].read(-c.Age[j])), durable, false, len(s.nodes))
	}
	return s
}

func (s *sim) newRun() string {
	s.runs++
	return runName(s.runs)
}

func (s *sim) reach(c *client, i int) bool { return s.now >= c.cut[i] }

func (s *sim) tracef(format string, a ...any) {
	if s.trace != nil {
		s.trace(fmt.Sprintf(format, a...))
	}
}

// apply runs one event.
func (s *sim) apply(e event) {
	nd := &s.nodes[e.I]
	switch e.Kind {
	case evGrant:
		s.acquire(e.C, e.K, e.TTL, e.X == 1)
	case evRelease:
		s.unlock(e.C, e.K)
	case evExtend:
		s.extend(e.C, e.K, e.X == 1)
	case evAdvance:
		s.now += e.D
		for j := range s.clients {
			s.background(&s.clients[j])
		}
	case evPartition:
		for i := range s.nodes {
			if e.X&(1<<i) != 0 {
				s.clients[e.C].cut[i] = s.now + e.D
			}
		}
	case evClientRestart:
		old := &s.clients[e.C]
		c := newClient(old.clk, old.time(s.now), old.durable, s.v != revertFresh, len(s.nodes))
		c.cut = old.cut
		*old = c
	case evRestart:
		mode := e.X
		if s.out&outsideOlderCopy == 0 && mode == 2 {
			mode = 1
		}
		nd.restart(s.now, s.newRun(), mode, e.Y, e.D)
	case evReplace:
		nd.replace(s.now, s.newRun())
	case evFailover:
		nd.failover(s.now, s.newRun(), e.D, time.Duration(e.Y)*time.Second)
	case evAttach:
		if s.out&outsideAttach != 0 {
			nd.attachReplica(s.now)
		}
	case evEvict:
		nd.evict(s.now, e.X)
	}
}

// check is the oracle: hold h must not overlap another holder of its key.
func (s *sim) check(h int) {
	a := s.holds[h]
	for j, b := range s.holds {
		if j != h && b.k == a.k && a.start < b.end && b.start < a.end && s.double == "" {
			s.double = fmt.Sprintf("double grant of k%d at %v: %v and %v", a.k, s.now, b, a)
		}
	}
}

// promise is the stronger oracle, trust's own promise: node i's yes to
// owner on k counts while another lock on k is held whose latest round
// counted node i's yes, so node i has lost that lock's key (the key
// outlives the validity on every clock within the budget).
func (s *sim) promise(i, k int, owner uint64) {
	for _, h := range s.holds {
		if h.k == k && h.owner != owner && s.now < h.end && h.quorum&(1<<i) != 0 && s.broken == "" {
			s.broken = fmt.Sprintf("n%d's yes counted for k%d at %v while it had lost %v, whose quorum it was in", i, k, s.now, h)
		}
	}
}

// run runs schedule sc under variant v and returns its first violations
// ("" none): a double grant, a node that counted while it had lost a
// live lock, or both.
func run(sc schedule, v variant, trace func(string)) string {
	return simulate(sc, v, *flagOutside, trace)
}

// simulate is run with what out lets in.
func simulate(sc schedule, v variant, out int, trace func(string)) string {
	s := newSim(sc.cfg, v, out, trace)
	for j, e := range sc.events {
		s.tracef("%2d %v: %v", j, s.now, e)
		s.apply(e)
		if s.double != "" || s.broken != "" {
			return fmt.Sprintf("event %d (%v): %s", j, e, strings.TrimPrefix(s.double+"; "+s.broken, "; "))
		}
	}
	return ""
}
