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
	"github.com/redlock-go/redlock/node"
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
// window ago (without appendfsync always), and second addresses of one
// server. It is safe for concurrent use.
type quarantine struct {
	clock  clock.Clock
	addrs  []string
	window func() time.Duration // the longest TTL used so far, or a fixed window
	fresh  bool                 // strict mode: also quarantine nodes first met young
	mu     sync.Mutex
	ids    []node.Identity // last identity learned per node; RunID "" = never
	until  []time.Time     // end of each node's quarantine; zero = none
	reason []string
	stats  QuarantineStats // counters (Now unset)
	onEnd  func(i int)     // called when a node's quarantine is found over; may be nil
}

// QuarantineStats is what the restart quarantine has seen (see
// WithRestartQuarantine, Client.QuarantineStats).
type QuarantineStats struct {
	Started uint64 // quarantines begun: restarts, fail-overs, fresh nodes in strict mode
	Aliases uint64 // nodes found to be a server that an earlier node already is (same run_id)
	Now     int    // nodes quarantined now
}

func newQuarantine(c clock.Clock, addrs []string, window func() time.Duration, fresh bool) *quarantine {
	n := len(addrs)
	return &quarantine{clock: c, addrs: addrs, window: window, fresh: fresh,
		ids: make([]node.Identity, n), until: make([]time.Time, n), reason: make([]string, n)}
}

// learn records node i's identity, read just now. It returns the end of a
// quarantine it started (zero if none): a node whose run_id changed since
// it was last learned restarted, and what it held may be gone; it stays out
// until window - uptime from now, i.e. one window after its start. A new
// run_id whose uptime is already past the window is another server at this
// address (a promoted replica after fail-over, a moved DNS name): it never
// saw the writes the old one acknowledged, so it stays out one full window
// from now. A durable node (appendonly, appendfsync always) lost nothing
// by a restart; a fail-over is quarantined all the same.
func (q *quarantine) learn(i int, id node.Identity) time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	prev := q.ids[i]
	q.ids[i] = id
	w := q.window()
	if prev.RunID == id.RunID || w <= 0 {
		return time.Time{}
	}
	reason, left := "restart observed", w-id.Uptime
	switch {
	case prev.RunID == "" && (!q.fresh || id.Durable()):
		return time.Time{}
	case prev.RunID == "":
		reason = "fresh start"
	case id.Uptime >= w:
		reason, left = "another server at this address (fail-over?)", w
	case id.Durable():
		return time.Time{}
	}
	if left <= 0 {
		return time.Time{}
	}
	q.until[i] = q.clock.Now().Add(left)
	q.reason[i] = reason
	q.stats.Started++
	return q.until[i]
}

// discount is the gate: node i's vote does not count while it is
// quarantined, or when an earlier node has its run_id.
// A quarantine found over is cleared and reported to onEnd.
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
	u := q.until[i]
	if !u.IsZero() && q.clock.Now().Before(u) {
		q.mu.Unlock()
		return &QuarantineError{Addr: q.addrs[i], Until: u, Reason: q.reason[i]}
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
	for _, u := range q.until {
		if !u.IsZero() && now.Before(u) {
			s.Now++
		}
	}
	return s
}

// QuarantineStats returns what the restart quarantine has seen so far; the
// zero QuarantineStats when it is off. Safe for concurrent use.
func (c *Client) QuarantineStats() QuarantineStats {
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
const QuarantineOff time.Duration = 0

// WithRestartQuarantine sets the restart quarantine (default: on, the
// window being the longest TTL, watchdog lease included, this Client has
// used so far). A node whose run_id changes (it restarted) and that does
// not run appendonly yes with appendfsync always does not count toward the
// quorum until window after its start, since it may have lost locks it
// held. QuarantineOff (0) turns it off; a negative window is refused by New.
// See QuarantineFresh for nodes met for the first time.
func WithRestartQuarantine(window time.Duration, modes ...QuarantineMode) Option {
	return func(o *options) {
		o.qWindow, o.qSet = window, true
		for _, m := range modes {
			if m == QuarantineFresh {
				o.qFresh = true
			}
		}
	}
}

// identities is what New adds for the quarantine: a dial hook per node
// that counts its connections, and what was learned at which count.
type identities struct {
	gen     []atomic.Uint64 // dials per node (dialHook)
	learned []atomic.Uint64 // gen+1 when the identity was last learned; 0 never
	maxTTL  atomic.Int64    // longest TTL used, the default window
	alias   []atomic.Bool   // ErrSameServer logged once per node
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

// identify learns node i's identity within ctx and feeds it to the gate;
// a failure leaves the node stale, to be asked again. A node that refuses
// INFO (an ACL without it) cannot be identified at all: it is marked known
// until its next redial, so that it is not asked on every call, and its
// votes count, unprotected by the quarantine (see README).
func (c *Client) identify(ctx context.Context, i int) {
	g := c.ids.gen[i].Load()
	id, err := c.nodes[i].Identify(ctx)
	if refusesInfo(err) {
		c.ids.learned[i].Store(g + 1)
	}
	if err != nil {
		return
	}
	if u := c.q.learn(i, id); !u.IsZero() && c.o.logger != nil {
		c.o.logger.LogAttrs(ctx, slog.LevelWarn, "redlock: node quarantined", slog.String("client", c.id),
			slog.String("node", c.nodes[i].Addr()), slog.String("run_id", id.RunID), slog.Duration("for", u.Sub(c.o.clock.Now())))
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
			return
		}
		c.o.logger.LogAttrs(ctx, slog.LevelWarn, "redlock: two nodes are one server; the later one's vote does not count",
			slog.String("client", c.id), slog.String("node", se.Addr), slog.String("same_as", se.Other), slog.String("run_id", se.RunID))
	}
}

// identifyNew notes ttl for the default window, then identifies, in
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
	for cur := c.ids.maxTTL.Load(); int64(ttl) > cur && !c.ids.maxTTL.CompareAndSwap(cur, int64(ttl)); cur = c.ids.maxTTL.Load() {
	}
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
		c.identify(ctx, i)
		if ok && err == nil && c.stale(i) { // identity unreadable in time: it may be a restart
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
	if (c.o.qSet && c.o.qWindow == QuarantineOff) || c.cluster {
		return
	}
	window := func() time.Duration { return time.Duration(c.ids.maxTTL.Load()) }
	if c.o.qSet {
		w := c.o.qWindow
		window = func() time.Duration { return w }
	}
	c.ids.gen = make([]atomic.Uint64, len(clients))
	c.ids.learned = make([]atomic.Uint64, len(clients))
	c.ids.alias = make([]atomic.Bool, len(clients))
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
	c.gates = append(c.gates, c.q)
}
