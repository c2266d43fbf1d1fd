package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/clock"
	"github.com/redlock-go/redlock/internal/node"
)

// ErrNodeQuarantined matches a node's vote that does not count because the
// node restarted (or, in strict mode, started) less than the quarantine
// window ago and may have lost the keys it held. See *QuarantineError.
var ErrNodeQuarantined = errors.New("redlock: node quarantined after a restart")

// ErrSameServer matches the vote of a node that is the same server (same
// run_id) as an earlier node under another address: one server must not
// cast two votes.
var ErrSameServer = errors.New("redlock: node is the same server as another node")

// QuarantineError says which node is quarantined, why, and until when (on
// the Client's clock). It matches ErrNodeQuarantined.
type QuarantineError struct {
	Addr   string
	Until  time.Time
	Reason string // "restart observed" or "fresh start"
}

func (e *QuarantineError) Error() string {
	return fmt.Sprintf("redlock: node %s quarantined (%s) until %s", e.Addr, e.Reason, e.Until.Format(time.RFC3339Nano))
}

// Is makes a *QuarantineError match ErrNodeQuarantined.
func (e *QuarantineError) Is(target error) bool { return target == ErrNodeQuarantined }

// SameServerError names the two addresses of one server. It matches
// ErrSameServer.
type SameServerError struct {
	Addr, Other, RunID string
}

func (e *SameServerError) Error() string {
	return fmt.Sprintf("redlock: node %s is the same server as node %s (run_id %s): its vote does not count", e.Addr, e.Other, e.RunID)
}

// Is makes a *SameServerError match ErrSameServer.
func (e *SameServerError) Is(target error) bool { return target == ErrSameServer }

// quarantine is the gate that discounts nodes that restarted less than the
// window ago (unless this Client saw both processes durable), and second
// addresses of one server. It is safe for concurrent use.
type quarantine struct {
	clock   clock.Clock
	addrs   []string
	window  func() time.Duration // the deployment setting or this Client's longest TTL, whichever is longer
	created time.Time            // the Client's creation: a node started later is a process it never saw
	fresh   bool                 // strict mode: also quarantine nodes first met young
	mu      sync.Mutex
	ids     []node.Identity // last identity learned per node; RunID "" = never
	until   []time.Time     // end of each node's quarantine; zero = none
	base    []time.Time     // when the suspect process started (the quarantine counts from here)
	pending []bool          // suspect, the nodes' TTL registers not read yet: discounted meanwhile
	reason  []string
	stats   QuarantineStats // counters (Now unset)
	onEnd   func(i int)     // called when a node's quarantine is found over; may be nil
}

// QuarantineStats is what the restart quarantine has seen (see
// WithRestartQuarantine, Client.QuarantineStats).
type QuarantineStats struct {
	Started uint64 // quarantines begun: restarts, fail-overs, nodes started after the Client, fresh nodes in strict mode
	Aliases uint64 // nodes found to be a server that an earlier node already is (same run_id)
	Now     int    // nodes quarantined now
}

func newQuarantine(c clock.Clock, addrs []string, window func() time.Duration, fresh bool) *quarantine {
	n := len(addrs)
	return &quarantine{clock: c, addrs: addrs, window: window, created: c.Now(), fresh: fresh,
		ids: make([]node.Identity, n), until: make([]time.Time, n), base: make([]time.Time, n),
		pending: make([]bool, n), reason: make([]string, n)}
}

// verdict is what learn found in a node's identity.
type verdict struct {
	until   time.Time // end of a quarantine begun now; zero if none
	suspect bool      // a process that may have lost keys: read the TTL registers, then resolve
	changed bool      // a run_id other than the one learned before: a new process
}

// learn records node i's identity, read just now. A node whose run_id
// changed since it was last learned restarted, and what it held may be
// gone; so may what a node first met held if it started after this Client
// was created (by more than INFO's one-second resolution), or, in strict
// mode, if it started less than a window ago. Such a node is suspect: it
// stays out until window after its start (now - uptime) and, until
// resolve, at all. A new run_id whose uptime is already past the window is
// another server at this address (a promoted replica after fail-over, a
// moved DNS name): it never saw the writes the old one acknowledged, so
// it stays out one full window from now. A restart is exempt only when
// this Client saw both the old and the new process durable (appendonly,
// appendfsync always): a node restarted to turn durability on may have
// lost its keys on the way.
func (q *quarantine) learn(i int, id node.Identity) verdict {
	q.mu.Lock()
	defer q.mu.Unlock()
	prev := q.ids[i]
	q.ids[i] = id
	w := q.window()
	if prev.RunID == id.RunID || w <= 0 {
		return verdict{}
	}
	now := q.clock.Now()
	v := verdict{changed: prev.RunID != ""}
	reason, base := "restart observed", now.Add(-id.Uptime)
	switch {
	case prev.RunID == "" && now.Sub(q.created) > id.Uptime+time.Second:
		reason = "started after this Client"
	case prev.RunID == "" && q.fresh && id.Uptime < w:
		reason = "fresh start"
	case prev.RunID == "":
		return v
	case id.Uptime >= w:
		reason, base = "another server at this address (fail-over?)", now
	case prev.Durable() && id.Durable():
		return v
	}
	v.suspect = true
	q.base[i], q.reason[i], q.pending[i], q.until[i] = base, reason, true, time.Time{}
	if u := base.Add(w); u.After(now) {
		q.until[i], v.until = u, u
		q.stats.Started++
	}
	return v
}

// resolve ends node i's wait for the TTL registers (see learn): its
// quarantine lasts until reg (the longest TTL the other nodes carry; 0
// when none could be read) after its start, if that is later. It returns
// the quarantine's new end, or zero if it did not move.
func (q *quarantine) resolve(i int, reg time.Duration) time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pending[i] = false
	now := q.clock.Now()
	u := q.base[i].Add(reg)
	if !u.After(now) || !u.After(q.until[i]) {
		return time.Time{}
	}
	if q.until[i].IsZero() { // not begun by learn
		q.stats.Started++
	}
	q.until[i] = u
	return u
}

// discount is the gate: node i's vote does not count while it is
// quarantined or waits for the TTL registers, or when an earlier node has
// its run_id. A quarantine found over is cleared and reported to onEnd.
func (q *quarantine) discount(i int) error {
	q.mu.Lock()
	if r := q.ids[i].RunID; r != "" {
		for j := 0; j < i; j++ {
			if q.ids[j].RunID == r {
				q.mu.Unlock()
				return &SameServerError{Addr: q.addrs[i], Other: q.addrs[j], RunID: r}
			}
		}
	}
	u, now, reason := q.until[i], q.clock.Now(), q.reason[i]
	if q.pending[i] {
		if u.Before(now) {
			u = now
		}
		q.mu.Unlock()
		return &QuarantineError{Addr: q.addrs[i], Until: u, Reason: reason + "; the deployment's longest TTL not read yet"}
	}
	if !u.IsZero() && now.Before(u) {
		q.mu.Unlock()
		return &QuarantineError{Addr: q.addrs[i], Until: u, Reason: reason}
	}
	q.until[i] = time.Time{}
	q.mu.Unlock()
	if !u.IsZero() && q.onEnd != nil {
		q.onEnd(i)
	}
	return nil
}

// snapshot returns the counters and how many nodes are quarantined now.
func (q *quarantine) snapshot() QuarantineStats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.stats
	now := q.clock.Now()
	for i, u := range q.until {
		if q.pending[i] || !u.IsZero() && now.Before(u) {
			s.Now++
		}
	}
	return s
}

// quarantineStats returns what the restart quarantine has seen so far; the
// zero QuarantineStats when it is off.
func (c *Client) quarantineStats() QuarantineStats {
	if c.q == nil {
		return QuarantineStats{}
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
)

// QuarantineOff as WithRestartQuarantine's window turns quarantine off.
const QuarantineOff time.Duration = -1

// WithRestartQuarantine sets the restart quarantine (default: on, with
// DefaultQuarantineWindow). window is the deployment setting: the longest
// lock (TTL or watchdog lease) any client of the deployment may hold on
// these nodes. A node that restarted (its run_id changed), or that this
// Client first meets and that started after the Client was created, does
// not count toward the quorum until W after its start, W being the longest
// of window, this Client's longest TTL, and the longest TTL any client
// published in the nodes' register (node.MaxTTLKey, read from the other
// nodes when the restart is seen; the node does not count until that read
// answers or fails). Every Client raises that register to its longest TTL
// before the first command that may grant or lengthen a lock with it. A
// restart is exempt only if this Client saw both the old and the new
// process run appendonly yes with appendfsync always. A zero window keeps
// the default; QuarantineOff turns the quarantine off; another negative
// window is refused by New. See QuarantineFresh for nodes met young.
func WithRestartQuarantine(window time.Duration, modes ...QuarantineMode) Option {
	return clientOption(func(o *options) {
		set(&o.qWindow, window)
		for _, m := range modes {
			if m == QuarantineFresh {
				o.qFresh = true
			}
		}
	})
}

// identities is what New adds for the quarantine: a dial hook per node
// that counts its connections, and what was learned at which count.
type identities struct {
	gen     []atomic.Uint64 // dials per node (dialHook)
	learned []atomic.Uint64 // gen+1 when the identity was last learned; 0 never
	maxTTL  atomic.Int64    // longest TTL used: published, and part of the window
	pub     []atomic.Int64  // the longest TTL known raised in each node's register (see publish)
	alias   []atomic.Bool   // ErrSameServer logged once per node
	noInfo  []atomic.Bool   // the node refused INFO (an ACL): it cannot be identified, and counts unprotected
}

// dialHook bumps a node's dial count: a new connection may reach a server
// that restarted, so its identity is due again.
type dialHook struct{ gen *atomic.Uint64 }

func (h dialHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err == nil {
			h.gen.Add(1)
		}
		return conn, err
	}
}

func (dialHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (dialHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// stale reports whether node i's identity is unknown or predates its
// latest connection.
func (c *Client) stale(i int) bool {
	return c.q != nil && c.ids.learned[i].Load() != c.ids.gen[i].Load()+1
}

// identify learns node i's identity within ctx and feeds it to the gate,
// and reports whether it did; a failure leaves the node stale, to be asked
// again. A node that refuses
// INFO (an ACL without it) cannot be identified at all: it is marked known
// until its next redial, so that it is not asked on every call, and its
// votes count, unprotected by the quarantine (see README).
func (c *Client) identify(ctx context.Context, i int) bool {
	g := c.ids.gen[i].Load()
	id, err := c.nodes[i].Identify(ctx)
	if refusesInfo(err) {
		c.ids.noInfo[i].Store(true)
		c.ids.learned[i].Store(g + 1)
	}
	if err != nil {
		return false
	}
	v := c.q.learn(i, id)
	if v.changed { // a new process: it has none of the registers raised before
		c.ids.pub[i].Store(0)
	}
	for cur := c.ids.pub[i].Load(); int64(id.MaxTTL) > cur && !c.ids.pub[i].CompareAndSwap(cur, int64(id.MaxTTL)); cur = c.ids.pub[i].Load() {
	}
	if v.suspect {
		c.resolveLater(i)
	}
	if !v.until.IsZero() && c.o.logger != nil {
		c.o.logger.LogAttrs(ctx, slog.LevelWarn, "redlock: node quarantined", slog.String("client", c.id),
			slog.String("node", c.nodes[i].Addr()), slog.String("run_id", id.RunID), slog.Duration("for", v.until.Sub(c.o.clock.Now())))
	}
	// Known for the connections dialed before INFO: one dialed during it
	// (by INFO itself or by another call) may reach a server restarted
	// since, so it leaves the node stale, to be identified again.
	c.ids.learned[i].Store(g + 1)
	var se *SameServerError
	if err := c.q.discount(i); errors.As(err, &se) && !c.ids.alias[i].Swap(true) {
		c.q.mu.Lock()
		c.q.stats.Aliases++
		c.q.mu.Unlock()
		if c.o.logger == nil {
			return true
		}
		c.o.logger.LogAttrs(ctx, slog.LevelWarn, "redlock: two nodes are one server; the later one's vote does not count",
			slog.String("client", c.id), slog.String("node", se.Addr), slog.String("same_as", se.Other), slog.String("run_id", se.RunID))
	}
	return true
}

// identifyNew notes ttl (see noteTTL), then identifies, in
// parallel within the node deadline for ttl, every node never identified
// yet (first contact) that has not timed out: before the round, so that
// two names of one server both known before either votes, and the later
// one's vote is discounted (see quarantine.discount). A node that times
// out here is suspect (probed, see nodeHealth) and, like a node whose
// identity went stale on a redial, is identified on its own goroutine
// before its command (identifyFirst): it does not hold up later rounds.
func (c *Client) identifyNew(ctx context.Context, ttl time.Duration) {
	if c.q == nil {
		return
	}
	c.noteTTL(ttl)
	var due uint64 // usually none, and then no context or timer is made
	for i := range c.nodes {
		if c.ids.learned[i].Load() == 0 && !c.health[i].suspect.Load() {
			due |= 1 << i
		}
	}
	if due == 0 {
		return
	}
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.callTimeout(ttl))
	defer cancel()
	for i := range c.nodes {
		if due&(1<<i) != 0 {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				if c.identify(ctx, i); ctx.Err() != nil && c.stale(i) {
					c.health[i].suspect.Store(true)
				}
			}(i)
		}
	}
	wg.Wait()
}

// identifyFirst identifies node i, if its identity is stale (a redial, or
// not learned by identifyNew), before an acquisition's command to it,
// within that call's node deadline (ctx): on the node's own goroutine, so
// that a stale node that does not answer (a frozen one, redialed after its
// calls timed out) delays only its own vote, not the round. The command is
// not sent, and the error says why, when ctx ended first or when what was
// learned discounts the node (quarantined, or another name of a server
// already counted): the round's gate (Config.Counts) was read before.
func (c *Client) identifyFirst(ctx context.Context, i int) error {
	if !c.stale(i) {
		return nil
	}
	c.identify(ctx, i)
	if err := ctx.Err(); err != nil && c.stale(i) {
		return gated(c.nodes[i].Addr(), "identity (INFO) not learned within the node deadline", err)
	}
	if err := c.discount(i); err != nil {
		return gated(c.nodes[i].Addr(), "identity learned", err)
	}
	return nil
}

// noteTTL makes ttl part of this Client's longest TTL: its own share of
// the window, and what publish raises the nodes' registers to.
func (c *Client) noteTTL(ttl time.Duration) {
	if c.q == nil {
		return
	}
	for cur := c.ids.maxTTL.Load(); int64(ttl) > cur && !c.ids.maxTTL.CompareAndSwap(cur, int64(ttl)); cur = c.ids.maxTTL.Load() {
	}
}

// publish raises node i's TTL register (node.MaxTTLKey) to this Client's
// longest TTL, if it has not done so since the node last started, before a
// command that may grant or lengthen a lock there: so that every node that
// holds a lock carries its TTL, and a Client that sees another node
// restart reads it there (readMaxTTL). A node that refuses the raise (an
// ACL without the key or EVALSHA) is not asked again until it restarts; its
// restarts are then covered by the deployment setting only. Any other
// failure is returned as a not-sent error (gated): the command is not sent.
func (c *Client) publish(ctx context.Context, i int) error {
	if c.q == nil {
		return nil
	}
	want := c.ids.maxTTL.Load()
	if c.ids.pub[i].Load() >= want {
		return nil
	}
	_, err := c.nodes[i].Do(ctx, node.RaiseMaxTTL(time.Duration(want)))
	var re redis.Error
	if err != nil && !errors.As(err, &re) {
		return gated(c.nodes[i].Addr(), "TTL register ("+node.MaxTTLKey+") not raised", err)
	}
	for cur := c.ids.pub[i].Load(); want > cur && !c.ids.pub[i].CompareAndSwap(cur, want); cur = c.ids.pub[i].Load() {
	}
	return nil
}

// resolveLater reads the other nodes' TTL registers for suspect node i on
// a goroutine of its own (Close waits for it), within the node timeout,
// and then resolves its quarantine; the node stays discounted until then.
// Read in the call that found the node suspect, a partitioned node's
// timeout would hold that call past its deadline, so that the node never
// got a command while it restarted.
func (c *Client) resolveLater(i int) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), c.o.nodeTimeout)
		defer cancel()
		u := c.q.resolve(i, c.readMaxTTL(ctx, i))
		if !u.IsZero() && c.o.logger != nil {
			c.o.logger.LogAttrs(ctx, slog.LevelWarn, "redlock: node quarantined for the deployment's longest TTL", slog.String("client", c.id),
				slog.String("node", c.nodes[i].Addr()), slog.Duration("for", u.Sub(c.o.clock.Now())))
		}
	}()
}

// readMaxTTL reads the TTL register of every node but i, in parallel
// within ctx, and returns the longest TTL found: 0 if none answered (the
// window then is the deployment setting and this Client's longest TTL).
func (c *Client) readMaxTTL(ctx context.Context, i int) time.Duration {
	var mu sync.Mutex
	var max time.Duration
	var wg sync.WaitGroup
	for j := range c.nodes {
		if j == i {
			continue
		}
		wg.Add(1)
		go func(j int) {
			defer wg.Done()
			if d, err := c.nodes[j].MaxTTL(ctx); err == nil {
				mu.Lock()
				max = maxDur(max, d)
				mu.Unlock()
			}
		}(j)
	}
	wg.Wait()
	return max
}

func maxDur(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
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

// checkYes runs after an acquisition command on node i that began at dial
// count g. If the command redialed, or the node's identity is not known for
// its latest connection, the node is identified now (within ctx). A yes
// then counts only if the identity is known and the gate does not discount
// the node now: another goroutine may have learned of a restart after the
// round read the gate (Config.Counts) at its start. Otherwise the yes
// becomes a discountedYes (not counted, undone).
func (c *Client) checkYes(ctx context.Context, i int, g uint64, ok bool, err error) (bool, error) {
	if c.q == nil {
		return ok, err
	}
	if c.ids.gen[i].Load() != g || c.stale(i) {
		// An identity learned now is of a server at least as new as the
		// one that answered the command (the older one is gone if it
		// restarted): discount checks it below. Only an identity that
		// could not be read leaves the yes in doubt; a dial during INFO
		// that leaves the node stale again does not.
		if !c.identify(ctx, i) && ok && err == nil && !c.ids.noInfo[i].Load() { // identity unreadable in time: it may be a restart
			return false, &discountedYes{&QuarantineError{Addr: c.nodes[i].Addr(), Until: c.o.clock.Now(), Reason: "reconnected, identity unknown"}}
		}
	}
	if !ok || err != nil {
		return ok, err
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
func (c *Client) setupQuarantine(clients []redis.UniversalClient) {
	if c.o.qWindow == QuarantineOff || c.cluster {
		return
	}
	w := c.o.qWindow
	window := func() time.Duration { return maxDur(w, time.Duration(c.ids.maxTTL.Load())) }
	c.ids.gen = make([]atomic.Uint64, len(clients))
	c.ids.learned = make([]atomic.Uint64, len(clients))
	c.ids.alias = make([]atomic.Bool, len(clients))
	c.ids.noInfo = make([]atomic.Bool, len(clients))
	c.ids.pub = make([]atomic.Int64, len(clients))
	for i, cl := range clients {
		cl.AddHook(dialHook{gen: &c.ids.gen[i]})
	}
	c.q = newQuarantine(c.o.clock, c.Nodes(), window, c.o.qFresh)
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
// node whose identity went stale (identifyFirst) and raises its TTL
// register (publish); after it, it checks that the node did not restart
// under the command (checkYes). Its discount is the quarantine's.
type restartGate struct{ c *Client }

func (g restartGate) discount(i int) error { return g.c.q.discount(i) }

func (g restartGate) prepare(ctx context.Context, ttl time.Duration) { g.c.identifyNew(ctx, ttl) }

func (g restartGate) before(ctx context.Context, i int) (uint64, error) {
	if err := g.c.identifyFirst(ctx, i); err != nil {
		return 0, err
	}
	if err := g.c.publish(ctx, i); err != nil {
		return 0, err
	}
	return g.c.gen(i), nil
}

func (g restartGate) after(ctx context.Context, i int, mark uint64, ok bool, err error) (bool, error) {
	return g.c.checkYes(ctx, i, mark, ok, err)
}
