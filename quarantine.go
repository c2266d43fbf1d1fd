package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/clock"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/trust"
	"github.com/redlock-go/redlock/observe"
	"github.com/redlock-go/redlock/transport"
)

// quarantine is the gate that discounts nodes that may have lost locks (a
// new process, evicted keys: the rules of internal/trust) until no lock
// they may have lost can still be held, and second addresses of one
// server. It owns each node's trust.Node and serializes its events. It is
// safe for concurrent use.
type quarantine struct {
	clock   clock.Clock
	addrs   []string
	window  func() time.Duration // the fallback: the deployment setting or this Client's longest TTL, whichever is longer
	setting time.Duration        // the deployment setting (labels the fallback; 0: window() is the setting)
	floor   bool                 // QuarantineSettingFloor: no window shorter than the fallback
	created time.Time            // the Client's creation: a node started later is a process it never saw
	fresh   bool                 // strict mode: also quarantine nodes first met young
	mu      sync.Mutex
	nodes   []trust.Node
	factor  float64                 // the drift factor: budget for the Client's clock rate over a window
	stats   observe.QuarantineStats // counters (Now, Nodes unset)
	onEnd   func(i int)             // called when a node's quarantine is found over; may be nil
}

func newQuarantine(c clock.Clock, addrs []string, window func() time.Duration, fresh bool) *quarantine {
	return &quarantine{clock: c, addrs: addrs, window: window, created: c.Now(), fresh: fresh,
		nodes: make([]trust.Node, len(addrs)), factor: 0.01}
}

// proc is what trust judges of an identity.
func proc(id node.Identity) trust.Proc {
	return trust.Proc{RunID: id.RunID, Uptime: id.Uptime, AOF: id.AOF, Fsync: id.FsyncAlways, Promoted: id.Promoted,
		Replicated: id.Replicated, Evicts: id.Evicts, Evicted: id.Evicted}
}

// learn feeds node i's identity, read just now with its own TTL register
// (own), to its trust state (trust.Node.Learn) and returns the verdict.
func (q *quarantine) learn(i int, id node.Identity, own node.Register) trust.Verdict {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := &q.nodes[i]
	v := n.Learn(trust.Seen{Proc: proc(id), Loaded: own.Loaded(n.Proc.RunID, id.RunID), Now: q.clock.Now(),
		Window: q.window(), Created: q.created, Fresh: q.fresh})
	if v.Suspect && !v.Until.IsZero() {
		q.stats.Started++
	}
	return v
}

// resolve ends suspicion epoch of node i with what the other nodes' TTL
// registers showed (trust.Prove): the window until which no lock the node
// may have lost can still be held, or, where the registers could not show
// one (proven false), the fallback: the longest of the deployment setting,
// this Client's longest TTL and the longest TTL read (longest), counted
// from the loss. It returns the window's end and its bound, and whether it
// took effect (trust.Node.Resolve).
func (q *quarantine) resolve(i int, epoch uint64, proven bool, until time.Time, longest time.Duration, proof string) (time.Time, string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	fb, bound := q.fallback()
	if longest > fb {
		fb, bound = longest, observe.BoundRegister
	}
	u, b, ok := q.nodes[i].Resolve(trust.Resolution{Epoch: epoch, Proven: proven, Until: until, Proof: proof,
		Fallback: fb, FBBound: bound, Floor: q.floor, Now: q.clock.Now()})
	if !ok {
		return u, b, false
	}
	switch b {
	case observe.BoundRegister:
		q.stats.ByRegister++
	case observe.BoundDurable:
		q.stats.ByDurable++
	case observe.BoundOwnTTL:
		q.stats.ByOwnTTL++
	default:
		q.stats.BySetting++
	}
	return u, b, true
}

// current reports whether epoch is still node i's latest suspicion and
// its window has not been shown by the registers yet.
func (q *quarantine) current(i int, epoch uint64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.nodes[i].Current(epoch)
}

// base returns since when node i may have lost keys.
func (q *quarantine) base(i int) time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.nodes[i].Base
}

// fallback is the window used where the registers show none: the
// deployment setting or this Client's longest TTL, whichever is longer,
// and which it is. q.mu must be held.
func (q *quarantine) fallback() (time.Duration, string) {
	w := q.window()
	if q.setting > 0 && w > q.setting {
		return w, observe.BoundOwnTTL
	}
	return w, observe.BoundSetting
}

// witness reports whether node j, whose identity id was read just now,
// can vouch for its TTL register (trust.Node.Witness).
func (q *quarantine) witness(j int, id node.Identity) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.nodes[j].Witness(proc(id), q.clock.Now(), q.created, q.fresh, q.window())
}

// discount is the gate: node i's vote does not count while it is
// quarantined or waits for the TTL registers, or when an earlier node has
// its run_id. A quarantine found over is cleared and reported to onEnd.
func (q *quarantine) discount(i int) error {
	q.mu.Lock()
	n := &q.nodes[i]
	if r := n.Proc.RunID; r != "" {
		for j := 0; j < i; j++ {
			if q.nodes[j].Proc.RunID == r {
				q.mu.Unlock()
				return &observe.SameServerError{Addr: q.addrs[i], Other: q.addrs[j], RunID: r}
			}
		}
	}
	now := q.clock.Now()
	if n.Pending {
		u := n.Until
		if u.Before(now) {
			u = now
		}
		err := &observe.QuarantineError{Addr: q.addrs[i], Until: u, Reason: n.Reason + "; the other nodes' TTL registers not read yet"}
		q.mu.Unlock()
		return err
	}
	ok, ended := n.Counts(now)
	if !ok {
		err := &observe.QuarantineError{Addr: q.addrs[i], Until: n.Until, Reason: n.Reason, Bound: n.Bound}
		q.mu.Unlock()
		return err
	}
	q.mu.Unlock()
	if ended && q.onEnd != nil {
		q.onEnd(i)
	}
	return nil
}

// snapshot returns the counters, how many nodes are quarantined now and
// each node's latest window.
func (q *quarantine) snapshot() observe.QuarantineStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.stats
	now := q.clock.Now()
	s.Nodes = make([]observe.NodeWindow, len(q.addrs))
	for i := range q.nodes {
		n := &q.nodes[i]
		if n.Open(now) {
			s.Now++
		}
		s.Nodes[i] = observe.NodeWindow{Addr: q.addrs[i], Until: n.Last, Bound: n.Bound, Reason: n.Reason, Pending: n.Pending}
	}
	return s
}

// quarantineStats returns what the restart quarantine has seen so far; the
// zero observe.QuarantineStats when it is off.
func (c *Client) quarantineStats() observe.QuarantineStats {
	if c.q == nil {
		return observe.QuarantineStats{}
	}
	return c.q.snapshot()
}

// QuarantineMode adjusts WithRestartQuarantine.
type QuarantineMode int

const (
	// QuarantineFresh (strict mode) also quarantines a node that this
	// Client first meets less than the window after its start: a freshly
	// started node cannot be told from one that restarted empty while
	// locks were held. It costs every new deployment (and every test that
	// starts nodes and locks at once) one window of unavailability.
	QuarantineFresh QuarantineMode = iota + 1
	// QuarantineSettingFloor keeps every restarted node out for at least
	// the fallback (the deployment setting, this Client's longest TTL),
	// even where the TTL registers show a shorter window. Use it where
	// some client of the nodes cannot publish its TTLs (an ACL without
	// the register key or EVALSHA): its locks are in no register. A Client
	// turns it on by itself, and logs a warning, once it finds on the
	// nodes an owner value this library did not write (go-redsync's).
	QuarantineSettingFloor
)

// WithRestartQuarantine sets the restart quarantine (default: on, with a
// 45 s window: the default 30 s lease and half of it again). A node that
// restarted (its run_id changed), or
// that this Client first meets and that started after the Client was
// created, does not count toward the quorum until no lock it may have lost
// can still be held. Every Client publishes, in each node's TTL register
// (node.TTLRegisterKey), the TTLs it uses and until when a lock with them
// may be held there, before the command that may grant or lengthen such a
// lock; entries expire with the last lock that needed them. When a restart
// is seen the other nodes' registers are read, and the node does not count
// meanwhile; if enough nodes that did not restart answered (N - N/2 of
// them: every quorum that may hold a lock includes one), the window is
// the register's: the node's start plus the longest TTL they carry, each
// entry capped by its own expiry (see SAFETY.md for the proof).
//
// window is the deployment setting, the longest lock (TTL or watchdog
// lease) any client of the deployment may hold on these nodes. It is used
// only where the registers cannot show a window (a majority of the nodes
// may have restarted, too few registers answered, or an ACL refused the
// register): then the node stays out until the longest of window, this
// Client's longest TTL and the longest TTL read, after its start; the
// registers are read again meanwhile, and a window they show later ends
// the quarantine earlier. A restart is exempt only if this Client saw both
// the old and the new process run appendonly yes with appendfsync always.
// A zero window keeps the default; QuarantineOff turns the quarantine off;
// another negative window is refused by New. See QuarantineFresh for nodes
// met young, QuarantineSettingFloor for clients that cannot publish.
func WithRestartQuarantine(window time.Duration, modes ...QuarantineMode) Option {
	return clientOption(func(o *options) {
		set(&o.qWindow, window)
		for _, m := range modes {
			switch m {
			case QuarantineFresh:
				o.qFresh = true
			case QuarantineSettingFloor:
				o.qFloor = true
			}
		}
	})
}

// identities is what New adds for the quarantine: a dial hook per node
// that counts its connections, and what was learned at which count.
type identities struct {
	gen     []atomic.Uint64                 // dials per node (transport.DialNotifier)
	learned []atomic.Uint64                 // gen+1 when the identity was last learned; 0 never
	maxTTL  atomic.Int64                    // longest TTL used: part of the fallback window
	alias   []atomic.Bool                   // observe.ErrSameServer logged once per node
	reading []atomic.Pointer[chan struct{}] // per node: closed when the identity read under way ends (learnAsync)
	failed  []atomic.Pointer[error]         // per node: the last identity read's error; nil after a success
	stale   []func(string)                  // per node: marks it stale (node.Bind's watcher: the guard found another process)
	// warned once per failure run (cleared on success): INFO refused
	infoWarned []atomic.Bool
}

// stale reports whether node i's identity is unknown or predates its
// latest connection.
func (c *Client) stale(i int) bool {
	return c.q != nil && c.ids.learned[i].Load() != c.ids.gen[i].Load()+1
}

// identify learns node i's identity within ctx, feeds it to the gate and
// binds the node's votes to that process (see node.Bind: a grant that
// finds another process there is refused by the node itself, and marks the
// node stale). It returns the error of a failed read, which leaves the
// node stale, to be asked again: a node that refuses INFO (an ACL without
// it) or names no process cannot be judged after a restart, so its votes
// do not count (logged, see warnNode).
func (c *Client) identify(ctx context.Context, i int) error {
	g := c.ids.gen[i].Load()
	id, own, err := c.nodes[i].IdentifyRegister(ctx)
	var re *node.RegisterError
	if errors.As(err, &re) { // identified; its register unread: not kept
		err = nil
	}
	if refusesInfo(err) {
		err = fmt.Errorf("its identity (INFO server: run_id) cannot be read, so a restart there could not be seen (an ACL needs +info: see docs/deployment.md): %w", err)
		c.warnNode(ctx, i, &c.ids.infoWarned[i], "redlock: the node's identity cannot be read: its votes do not count", err)
	}
	if err != nil {
		return err
	}
	c.ids.infoWarned[i].Store(false)
	v := c.q.learn(i, id, own)
	c.nodes[i].Bind(node.Binding{RunID: id.RunID, Evicted: id.Evicted, Factor: c.o.driftFactor}, c.ids.stale[i])
	if v.Suspect {
		c.resolveLater(i, v.Epoch, id.RunID, v.Kept, own)
	}
	// Known for the connections dialed before INFO: one dialed during it
	// (by INFO itself or by another call) may reach a server restarted
	// since, so it leaves the node stale, to be identified again.
	c.ids.learned[i].Store(g + 1)
	var se *observe.SameServerError
	if err := c.q.discount(i); errors.As(err, &se) && !c.ids.alias[i].Swap(true) {
		c.q.mu.Lock()
		c.q.stats.Aliases++
		c.q.mu.Unlock()
		if c.o.logger == nil {
			return nil
		}
		c.o.logger.LogAttrs(ctx, slog.LevelWarn, "redlock: two nodes are one server; the later one's vote does not count",
			slog.String("client", c.id), slog.String("node", se.Addr), slog.String("same_as", se.Other), slog.String("run_id", se.RunID))
	}
	return nil
}

// warnNode logs msg with node i's err at Warn, once until *once is
// cleared (the node's next success), through the Client's logger or
// slog.Default: a node whose votes cannot count must not fail in silence.
func (c *Client) warnNode(ctx context.Context, i int, once *atomic.Bool, msg string, err error) {
	if once.Swap(true) {
		return
	}
	lg := c.o.logger
	if lg == nil {
		lg = slog.Default()
	}
	lg.LogAttrs(ctx, slog.LevelWarn, msg, slog.String("client", c.id), slog.String("node", c.nodes[i].Addr()), slog.String("error", err.Error()))
}

// identityBudget is how long one identity read may take. What decides
// whether a node may vote is not read within a lock's node deadline: a
// loaded machine answers INFO later than a SET, and a node already bound
// keeps voting meanwhile through the guard in its grant script.
func (c *Client) identityBudget() time.Duration { return max(c.o.nodeTimeout, time.Second) }

// learnAsync identifies node i on a goroutine of its own (Close waits for
// it) within identityBudget, unless a read of it is under way: the returned
// channel is closed when that read ends. A node whose read timed out is
// suspect (probed, see nodeHealth).
func (c *Client) learnAsync(i int) <-chan struct{} {
	if p := c.ids.reading[i].Load(); p != nil {
		return *p
	}
	ch := make(chan struct{})
	if !c.ids.reading[i].CompareAndSwap(nil, &ch) {
		if p := c.ids.reading[i].Load(); p != nil {
			return *p
		}
		close(ch)
		return ch
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(c.closing, c.identityBudget())
		err := c.identify(ctx, i)
		if ctx.Err() != nil && c.stale(i) {
			c.health[i].suspect.Store(true)
		}
		if err != nil {
			c.ids.failed[i].Store(&err)
		} else {
			c.ids.failed[i].Store(nil)
		}
		cancel()
		c.ids.reading[i].Store(nil)
		close(ch)
	}()
	return ch
}

// identifyNew notes ttl (see noteTTL), then identifies, in parallel, every
// node never identified yet (first contact) that has not timed out: before
// the round, so that two names of one server are both known before either
// votes, and the later one's vote is discounted (see quarantine.discount).
// It waits until enough nodes for a quorum are known or answered, then for
// the others at most as long again (network time, like the node
// deadlines): a slow or frozen node does not hold up the first round. Its
// identification goes on in the background (learnAsync), and a node still
// unknown is identified before its own command, on its own goroutine
// (identifyFirst).
func (c *Client) identifyNew(ctx context.Context, ttl time.Duration) {
	if c.q == nil {
		return
	}
	c.noteTTL(ttl)
	known := 0
	var reads []<-chan struct{} // usually none, and then no timer is made
	for i := range c.nodes {
		switch {
		case c.ids.learned[i].Load() != 0:
			known++
		case !c.health[i].suspect.Load():
			reads = append(reads, c.learnAsync(i))
		}
	}
	if len(reads) == 0 || known >= c.need {
		return
	}
	start := time.Now()
	if !c.awaitReads(ctx, reads, c.need-known, nil) {
		return
	}
	// The rest get as long again as the quorum took: nodes as fast as
	// those are identified before the round; a frozen one is left to its
	// own call.
	t := time.NewTimer(max(time.Since(start), time.Millisecond))
	defer t.Stop()
	c.awaitReads(ctx, reads, len(reads), t.C)
}

// awaitReads waits until want of reads have ended (those already ended
// count), or until ctx ends, Close begins or stop fires (false).
func (c *Client) awaitReads(ctx context.Context, reads []<-chan struct{}, want int, stop <-chan time.Time) bool {
	done := 0
	for _, r := range reads {
		select {
		case <-r:
			done++
		default:
		}
	}
	for _, r := range reads {
		if done >= want {
			return true
		}
		select {
		case <-r:
			done++ // counted twice at most for one already ended: want is a lower bound
		case <-ctx.Done():
			return false
		case <-c.closing.Done():
			return false
		case <-stop:
			return false
		}
	}
	return done >= want
}

// identifyFirst makes sure node i may get an acquisition's command. A node
// never identified is identified first (learnAsync), waited for at most
// until ctx (that call's node deadline) ends: on the node's own goroutine,
// so that a node that does not answer delays only its own vote, not the
// round; its read goes on for the next round. A node identified before
// whose identity went stale (a redial) gets the command at once: its
// guarded grant script refuses on another process or evicted keys, and its
// identity read goes on in the background. The command is not sent,
// and the error says why, when the identity is still unknown or when what
// was learned discounts the node (quarantined, or another name of a server
// already counted): the round's gate (Config.Counts) was read before.
func (c *Client) identifyFirst(ctx context.Context, i int) error {
	if !c.stale(i) {
		return nil
	}
	if err := c.known(ctx, i); err != nil {
		return err
	}
	if err := c.discount(i); err != nil {
		return gated(c.nodes[i].Addr(), "identity learned", "", err)
	}
	return nil
}

// known reads node i's identity again (learnAsync). For a node judged
// before (its grants go guarded) it returns nil at once, the read going on
// in the background; a node never judged waits for the read until ctx
// ends, and an error says why it cannot be asked yet.
func (c *Client) known(ctx context.Context, i int) error {
	r := c.learnAsync(i)
	if c.ids.learned[i].Load() != 0 {
		// Judged before: the guarded grant script checks the process
		// itself. A wait here would cost every new pooled connection a
		// round trip.
		return nil
	}
	select {
	case <-r:
	case <-ctx.Done():
	}
	if c.ids.learned[i].Load() != 0 {
		return nil
	}
	err := ctx.Err()
	if p := c.ids.failed[i].Load(); p != nil {
		err = *p // the last read's own failure says more than our deadline
	} else if err == nil {
		err = errors.New("not read")
	}
	return gated(c.nodes[i].Addr(), "identity (INFO) not learned", "its identity (INFO) not read yet", err)
}

// noteTTL makes ttl part of this Client's longest TTL: its share of the
// fallback window.
func (c *Client) noteTTL(ttl time.Duration) {
	if c.q == nil {
		return
	}
	for cur := c.ids.maxTTL.Load(); int64(ttl) > cur && !c.ids.maxTTL.CompareAndSwap(cur, int64(ttl)); cur = c.ids.maxTTL.Load() {
	}
}

// refusesInfo reports an identification that the node answered with an
// error reply (NOPERM: an ACL without INFO) or without a run_id.
func refusesInfo(err error) bool {
	var re redis.Error
	return errors.As(err, &re) || errors.Is(err, node.ErrNoRunID)
}

// discountedYes is the error of a yes from a node found, right after the
// command redialed it, to be quarantined or an alias: the vote does not
// count, but the node holds our value and must be undone (mayHold).
type discountedYes struct{ err error }

func (e *discountedYes) Error() string { return "redlock: yes not counted: " + e.err.Error() }
func (e *discountedYes) Unwrap() error { return e.err }

// checkYes runs after an acquisition command on node i. A yes came from
// the guarded grant script (node.Bind), so it ran on the process this
// Client judged, with no key evicted since; it counts only if the gate
// does not discount the node now: another goroutine may have learned of a
// loss after the round read the gate (Config.Counts) at its start.
// Otherwise the yes becomes a discountedYes (not counted, undone). A node
// whose connection was redialed is identified again in the background. A
// refusal by the guard (node.ProcessError: another process, or evicted
// keys) carries what the new identity means for the node (quarantined, an
// alias), read within ctx.
func (c *Client) checkYes(ctx context.Context, i int, g uint64, ok bool, err error) (bool, error) {
	if c.q == nil {
		return ok, err
	}
	if c.ids.gen[i].Load() != g || c.stale(i) {
		r := c.learnAsync(i)
		if node.IsProcessError(err) {
			select { // what follows for the node, if it is read in time
			case <-r:
			case <-ctx.Done():
			}
		}
	}
	if err != nil {
		if node.IsProcessError(err) {
			if derr := c.discount(i); derr != nil {
				return false, fmt.Errorf("%w; %w", err, derr)
			}
		}
		return ok, err
	}
	if !ok {
		return ok, err
	}
	if c.ids.learned[i].Load() == 0 { // never judged: its command went unguarded
		return false, &discountedYes{&observe.QuarantineError{Addr: c.nodes[i].Addr(), Until: c.o.clock.Now(), Reason: "identity unknown"}}
	}
	if derr := c.discount(i); derr != nil {
		return false, &discountedYes{derr}
	}
	return ok, err
}

// gen returns node i's dial count (0 without quarantine).
func (c *Client) gen(i int) uint64 {
	if c.q == nil {
		return 0
	}
	return c.ids.gen[i].Load()
}

// setupQuarantine adds the dial hook to each node's client and the gate,
// unless quarantine is off. Cluster clients are left out: INFO without a
// key reaches an arbitrary shard.
func (c *Client) setupQuarantine(clients []transport.Conn) {
	if c.o.qWindow == QuarantineOff || c.cluster {
		return
	}
	w := c.o.qWindow
	window := func() time.Duration { return max(w, time.Duration(c.ids.maxTTL.Load())) }
	c.ids.gen = make([]atomic.Uint64, len(clients))
	c.ids.learned = make([]atomic.Uint64, len(clients))
	c.ids.alias = make([]atomic.Bool, len(clients))
	c.ids.reading = make([]atomic.Pointer[chan struct{}], len(clients))
	c.ids.failed = make([]atomic.Pointer[error], len(clients))
	c.ids.infoWarned = make([]atomic.Bool, len(clients))
	c.ids.stale = make([]func(string), len(clients))
	for i, cl := range clients {
		gen := &c.ids.gen[i]
		if d, ok := cl.(transport.DialNotifier); ok {
			d.OnDial(func() { gen.Add(1) })
		}
		c.ids.stale[i] = func(string) { gen.Add(1) } // identified again before its next command
	}
	c.q = newQuarantine(c.o.clock, c.Addrs(), window, c.o.qFresh)
	c.q.setting, c.q.floor, c.q.factor = w, c.o.qFloor, c.o.driftFactor
	if lg := c.o.logger; lg != nil {
		c.q.onEnd = func(i int) {
			lg.LogAttrs(context.Background(), slog.LevelInfo, "redlock: node quarantine over; its vote counts again",
				slog.String("client", c.id), slog.String("node", c.nodes[i].Addr()))
		}
	}
	g := restartGate{c}
	c.gates = append(c.gates, g)
	c.around = g
}

// restartGate is the quarantine as the Client's callGate: before a round
// it identifies the nodes never met (identifyNew); before a command, a
// node whose identity went stale (identifyFirst) and publishes the
// command's TTL in its register (publish), also before a watchdog
// renewal; after it, it checks that the node did not restart under the
// command (checkYes). Its discount is the quarantine's.
type restartGate struct{ c *Client }

func (g restartGate) discount(i int) error { return g.c.q.discount(i) }

func (g restartGate) prepare(ctx context.Context, ttl time.Duration) { g.c.identifyNew(ctx, ttl) }

func (g restartGate) before(ctx context.Context, i int, ttl time.Duration) (uint64, error) {
	if err := g.c.identifyFirst(ctx, i); err != nil {
		return 0, err
	}
	return g.c.gen(i), nil
}

func (g restartGate) renew(ctx context.Context, i int, ttl time.Duration) error {
	g.c.noteTTL(ttl)
	if !g.c.stale(i) {
		return nil
	}
	return g.c.known(ctx, i)
}

func (g restartGate) after(ctx context.Context, i int, mark uint64, ok bool, err error) (bool, error) {
	return g.c.checkYes(ctx, i, mark, ok, err)
}

// floorNow turns QuarantineSettingFloor on, because owner values that are
// in no TTL register were found on the nodes (see foreign.go): from now on
// no restart window is shorter than the fallback, and every window that
// the registers set shorter is lengthened to it, from its node's start,
// when that is still ahead (also for a node whose window is over: a lock
// it lost may still be held). It reports whether the floor was off.
func (q *quarantine) floorNow() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.floor {
		return false
	}
	q.floor = true
	fb, bound := q.fallback()
	now := q.clock.Now()
	for i := range q.nodes {
		q.nodes[i].Lengthen(fb, bound, now)
	}
	return true
}

// quarantinedPending counts the nodes of out that had not answered at the
// decision and are in restart quarantine now: a round decides at once when
// too few countable nodes are left, before such a node's "no" arrives. A
// node in quarantine restarted since it was judged; it counts again no
// sooner than any lock it may have lost could still be held, this one
// included (its TTL is in the registers and the window), so for a renewal
// or extension it is as good as a "no".
func (c *Client) quarantinedPending(out quorum.Outcome) int {
	if c.q == nil {
		return 0
	}
	n := 0
	for i, v := range out.Votes {
		var qe *observe.QuarantineError
		if v.Discounted && !v.Done && errors.As(c.q.discount(i), &qe) {
			n++
		}
	}
	return n
}
