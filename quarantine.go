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
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/observe"
)

// QuarantineError says which node is quarantined, why, until when (on
// the Client's clock) and which bound set the window. It matches
// ErrNodeQuarantined.
type QuarantineError struct {
	Addr   string
	Until  time.Time
	Reason string // "restart observed", "started after this Client", "fresh start", ...
	Bound  string // observe.BoundRegister, BoundOwnTTL or BoundSetting; "" while the registers are read
}

func (e *QuarantineError) Error() string {
	s := fmt.Sprintf("redlock: node %s quarantined (%s) until %s", e.Addr, e.Reason, e.Until.Format(time.RFC3339Nano))
	if e.Bound != "" {
		s += " (window set by the " + e.Bound + ")"
	}
	return s
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

// quarantine is the gate that discounts nodes that restarted (unless this
// Client saw both processes durable) until no lock they may have lost can
// still be held, and second addresses of one server. It is safe for
// concurrent use.
type quarantine struct {
	clock   clock.Clock
	addrs   []string
	window  func() time.Duration // the fallback: the deployment setting or this Client's longest TTL, whichever is longer
	setting time.Duration        // the deployment setting (labels the fallback; 0: window() is the setting)
	floor   bool                 // QuarantineSettingFloor: no window shorter than the fallback
	created time.Time            // the Client's creation: a node started later is a process it never saw
	fresh   bool                 // strict mode: also quarantine nodes first met young
	mu      sync.Mutex
	ids     []node.Identity // last identity learned per node; RunID "" = never
	until   []time.Time     // end of each node's quarantine; zero = none
	base    []time.Time     // latest time the suspect process may have started (the window counts from here)
	pending []bool          // suspect, the nodes' TTL registers not read yet: discounted meanwhile
	epoch   []uint64        // suspicions begun per node: a resolution for an older one is dropped
	reason  []string
	bound   []string                // which bound set each node's latest window
	last    []time.Time             // each node's latest window end (kept after the window is over)
	factor  float64                 // the drift factor: budget for the Client's clock rate over a window
	stats   observe.QuarantineStats // counters (Now, Nodes unset)
	onEnd   func(i int)             // called when a node's quarantine is found over; may be nil
}

func newQuarantine(c clock.Clock, addrs []string, window func() time.Duration, fresh bool) *quarantine {
	n := len(addrs)
	return &quarantine{clock: c, addrs: addrs, window: window, created: c.Now(), fresh: fresh,
		ids: make([]node.Identity, n), until: make([]time.Time, n), base: make([]time.Time, n),
		pending: make([]bool, n), epoch: make([]uint64, n), reason: make([]string, n), bound: make([]string, n),
		last: make([]time.Time, n), factor: 0.01}
}

// verdict is what learn found in a node's identity.
type verdict struct {
	until   time.Time // provisional end of a quarantine begun now (the fallback); zero if none
	suspect bool      // a process that may have lost keys: read the TTL registers, then resolve
	changed bool      // a run_id other than the one learned before: a new process
	kept    bool      // a restart that loaded the previous process's append-only file (see learn)
	epoch   uint64    // the suspicion's number, for resolve
}

// learn records node i's identity, read just now. A node whose run_id
// changed since it was last learned restarted, and what it held may be
// gone; so may what a node first met held if it started after this Client
// was created (by more than INFO's one-second resolution), or, in strict
// mode, if it started less than a window ago. Such a node is suspect: it
// does not count until resolve has read the other nodes' TTL registers,
// and then until its window ends, counted from its start (now - uptime +
// 1 s, at most now: the latest start INFO's whole seconds allow). Its provisional end is the
// fallback (window after its start). A new run_id whose uptime is already
// past the window is another server at this address (a promoted replica
// after fail-over, a moved DNS name): it never saw the writes the old one
// acknowledged, and its window counts from now. A restart is exempt only
// when this Client saw both the old and the new process durable
// (appendonly, appendfsync always): a node restarted to turn durability on
// may have lost its keys on the way. A restart kept its votes when the new
// process runs appendonly yes and its TTL register (own) shows that it
// loaded the old process's append-only file (node.Register.Loaded), with
// every vote confirmed on disk (see WithDurableVotes, proveWindow).
func (q *quarantine) learn(i int, id node.Identity, own node.Register) verdict {
	q.mu.Lock()
	defer q.mu.Unlock()
	prev := q.ids[i]
	q.ids[i] = id
	w := q.window()
	if prev.RunID == id.RunID || w <= 0 {
		return verdict{}
	}
	now := q.clock.Now()
	// A promoted replica carries the old primary's stamp by replication,
	// not from an append-only file the old primary confirmed: not kept.
	v := verdict{changed: prev.RunID != "", kept: id.AOF && !id.Promoted && own.Loaded(prev.RunID, id.RunID)}
	// INFO's uptime is the difference of two whole-second clock readings:
	// the process may be up to a second younger than it says.
	reason, base := "restart observed", now.Add(min(time.Second-id.Uptime, 0))
	switch {
	case prev.RunID == "" && now.Sub(q.created) > id.Uptime+time.Second:
		reason = "started after this Client"
	case prev.RunID == "" && q.fresh && id.Uptime < w:
		reason = "fresh start"
	case prev.RunID == "":
		return v
	case id.Uptime >= w || id.Promoted:
		reason, base, v.kept = "another server at this address (fail-over?)", now, false
	case prev.Durable() && id.Durable():
		return v
	}
	v.suspect = true
	q.epoch[i]++
	v.epoch = q.epoch[i]
	q.base[i], q.reason[i], q.pending[i], q.until[i], q.bound[i] = base, reason, true, time.Time{}, ""
	if u := base.Add(w); u.After(now) {
		q.until[i], v.until = u, u
		q.stats.Started++
	}
	q.last[i] = q.until[i]
	return v
}

// resolve ends suspicion epoch of node i with what the other nodes' TTL
// registers showed (see proveWindow): the window until which no lock the
// node may have lost can still be held, or, where the registers could not
// show one (proven false), the fallback: the longest of the deployment
// setting, this Client's longest TTL and the longest TTL read (longest),
// counted from the node's start. It returns the window's end and its
// bound, and whether it took effect (false for an epoch no longer current,
// or, under QuarantineSettingFloor, a proof shorter than the fallback).
// A later resolve of the same epoch may shorten a fallback to a proof:
// the node was discounted all along.
func (q *quarantine) resolve(i int, epoch uint64, proven bool, until time.Time, longest time.Duration, proof string) (time.Time, string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.epoch[i] != epoch || !q.pending[i] && shown(q.bound[i]) {
		return time.Time{}, "", false
	}
	fb, bound := q.fallback()
	if longest > fb {
		fb, bound = longest, observe.BoundRegister
	}
	fallback := q.base[i].Add(fb)
	if !proven || q.floor && until.Before(fallback) {
		if !q.pending[i] { // already on the fallback
			return q.until[i], q.bound[i], false
		}
		until = fallback // bound: the setting, this Client's TTL, or the longest TTL read (register)
	} else {
		bound = proof
	}
	now := q.clock.Now()
	if !until.After(now) {
		until = now
	}
	if q.until[i].IsZero() && until.After(now) {
		q.stats.Started++
	}
	q.pending[i], q.until[i], q.bound[i], q.last[i] = false, until, bound, until
	switch bound {
	case observe.BoundRegister:
		q.stats.ByRegister++
	case observe.BoundDurable:
		q.stats.ByDurable++
	case observe.BoundOwnTTL:
		q.stats.ByOwnTTL++
	default:
		q.stats.BySetting++
	}
	return until, bound, true
}

// current reports whether epoch is still node i's latest suspicion and
// its window has not been shown by the registers yet.
func (q *quarantine) current(i int, epoch uint64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.epoch[i] == epoch && !shown(q.bound[i])
}

// shown reports whether bound is a window shown by the registers, which a
// later read does not change.
func shown(bound string) bool { return bound == observe.BoundRegister || bound == observe.BoundDurable }

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
// can vouch for its TTL register: its process is one this Client knows,
// not under quarantine or suspicion, and not one the quarantine would
// suspect if it met it now (started after this Client, or young in strict
// mode). Such a node kept its register since before any lock that may
// still be held was last granted or extended on it (see SAFETY.md).
func (q *quarantine) witness(j int, id node.Identity) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	now, known := q.clock.Now(), q.ids[j]
	switch {
	case q.pending[j] || now.Before(q.until[j]):
		return false
	case q.bound[j] == observe.BoundDurable && now.Before(q.base[j].Add(q.window())):
		// Exempt at once, it vouches for the durable entries only: a plain
		// entry published shortly before its crash may be missing.
		return false
	case known.RunID == "":
		return now.Sub(q.created) <= id.Uptime+time.Second && !(q.fresh && id.Uptime < q.window())
	}
	return known.RunID == id.RunID
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
	u, now, reason, bound := q.until[i], q.clock.Now(), q.reason[i], q.bound[i]
	if q.pending[i] {
		if u.Before(now) {
			u = now
		}
		q.mu.Unlock()
		return &QuarantineError{Addr: q.addrs[i], Until: u, Reason: reason + "; the other nodes' TTL registers not read yet"}
	}
	if !u.IsZero() && now.Before(u) {
		q.mu.Unlock()
		return &QuarantineError{Addr: q.addrs[i], Until: u, Reason: reason, Bound: bound}
	}
	q.until[i] = time.Time{}
	q.mu.Unlock()
	if !u.IsZero() && q.onEnd != nil {
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
	for i, u := range q.until {
		if q.pending[i] || !u.IsZero() && now.Before(u) {
			s.Now++
		}
		s.Nodes[i] = observe.NodeWindow{Addr: q.addrs[i], Until: q.last[i], Bound: q.bound[i], Reason: q.reason[i], Pending: q.pending[i]}
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

// WithRestartQuarantine sets the restart quarantine (default: on, with
// DefaultQuarantineWindow). A node that restarted (its run_id changed), or
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
	gen     []atomic.Uint64 // dials per node (dialHook)
	learned []atomic.Uint64 // gen+1 when the identity was last learned; 0 never
	maxTTL  atomic.Int64    // longest TTL used: part of the fallback window
	pub     []published     // what this Client published in each node's register (see publish)
	alias   []atomic.Bool   // ErrSameServer logged once per node
	stale   []func(string)  // per node: marks it stale (node.Bind's watcher: the guard found another process)
	// warned once per failure run (cleared on success): INFO refused, the
	// register not written
	infoWarned, regWarned []atomic.Bool
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
	if v.changed { // a new process: it has none of the entries published before
		c.ids.pub[i].reset()
	}
	c.nodes[i].Bind(id.RunID, c.ids.stale[i])
	if v.suspect {
		c.resolveLater(i, v.epoch, id.RunID, v.kept, own)
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

// identifyNew notes ttl (see noteTTL), then identifies, in parallel
// within the node deadline for ttl, every node never identified yet (first
// contact) that has not timed out: before the round, so that two names of
// one server are both known before either votes, and the later one's vote
// is discounted (see quarantine.discount). It waits until enough nodes for
// a quorum are known or answered, then for the others at most as long
// again (network time, like the node deadlines): a slow or frozen node
// does not hold up the first round. Its identification goes on in the background
// (tracked, so Close waits for it); a node that times out there is suspect
// (probed, see nodeHealth), and a node still unknown is identified before
// its own command, on its own goroutine (identifyFirst).
func (c *Client) identifyNew(ctx context.Context, ttl time.Duration) {
	if c.q == nil {
		return
	}
	c.noteTTL(ttl)
	var due uint64 // usually none, and then no context or timer is made
	known, n := 0, 0
	for i := range c.nodes {
		switch {
		case c.ids.learned[i].Load() != 0:
			known++
		case !c.health[i].suspect.Load():
			due |= 1 << i
			n++
		}
	}
	if n == 0 || known >= c.need {
		return
	}
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.callTimeout(ttl))
	var left atomic.Int32
	left.Store(int32(n))
	finish := func() { // the last identification ends the context
		if left.Add(-1) == 0 {
			cancel()
		}
	}
	done := make(chan struct{}, n) // buffered: stragglers never block
	c.wg.Add(n)
	for i := range c.nodes {
		if due&(1<<i) != 0 {
			go func(i int) {
				defer c.wg.Done()
				if _ = c.identify(ictx, i); ictx.Err() != nil && c.stale(i) {
					c.health[i].suspect.Store(true)
				}
				finish()
				done <- struct{}{}
			}(i)
		}
	}
	start := time.Now()
	for ; n > 0 && known < c.need; n-- {
		<-done
		known++
	}
	if n == 0 {
		return
	}
	// The rest get as long again as the quorum took: nodes as fast as
	// those are identified before the round, each with a command deadline
	// of its own after it; a frozen one is left to its own call.
	t := time.NewTimer(max(time.Since(start), time.Millisecond))
	defer t.Stop()
	for ; n > 0; n-- {
		select {
		case <-done:
		case <-t.C:
			return
		}
	}
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
	if err := c.identify(ctx, i); err != nil && c.stale(i) {
		return gated(c.nodes[i].Addr(), "identity (INFO) not learned", "its identity (INFO) not read", err)
	}
	if err := c.discount(i); err != nil {
		return gated(c.nodes[i].Addr(), "identity learned", "", err)
	}
	return nil
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

// checkYes runs after an acquisition command on node i that began at dial
// count g. If the command redialed, or the node's identity is not known for
// its latest connection, the node is identified now (within ctx). A yes
// then counts only if the identity is known and the gate does not discount
// the node now: another goroutine may have learned of a restart after the
// round read the gate (Config.Counts) at its start. Otherwise the yes
// becomes a discountedYes (not counted, undone). A refusal by the node's
// process guard (node.ProcessError: it runs another process) carries what
// the new identity means for the node (quarantined, an alias).
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
		if c.identify(ctx, i) != nil && ok && err == nil { // identity unreadable: it may be a restart
			return false, &discountedYes{&QuarantineError{Addr: c.nodes[i].Addr(), Until: c.o.clock.Now(), Reason: "reconnected, identity unknown"}}
		}
	}
	if err != nil {
		if node.IsProcessError(err) { // identified above (the guard marked the node stale): say what follows
			if derr := c.discount(i); derr != nil {
				return false, fmt.Errorf("%w; %w", err, derr)
			}
		}
		return ok, err
	}
	if !ok {
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
	window := func() time.Duration { return max(w, time.Duration(c.ids.maxTTL.Load())) }
	c.ids.gen = make([]atomic.Uint64, len(clients))
	c.ids.learned = make([]atomic.Uint64, len(clients))
	c.ids.alias = make([]atomic.Bool, len(clients))
	c.ids.infoWarned = make([]atomic.Bool, len(clients))
	c.ids.regWarned = make([]atomic.Bool, len(clients))
	c.ids.stale = make([]func(string), len(clients))
	c.ids.pub = make([]published, len(clients))
	for i, cl := range clients {
		cl.AddHook(dialHook{gen: &c.ids.gen[i]})
		gen := &c.ids.gen[i]
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
	if err := g.c.publish(ctx, i, ttl); err != nil {
		return 0, err
	}
	return g.c.gen(i), nil
}

func (g restartGate) renew(ctx context.Context, i int, ttl time.Duration) error {
	g.c.noteTTL(ttl)
	if g.c.stale(i) {
		if err := g.c.identify(ctx, i); err != nil && g.c.stale(i) {
			return gated(g.c.nodes[i].Addr(), "identity (INFO) not learned", "its identity (INFO) not read", err)
		}
	}
	return g.c.publish(ctx, i, ttl)
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
	for i := range q.until {
		if q.pending[i] || q.bound[i] != observe.BoundRegister || q.base[i].IsZero() {
			continue
		}
		if u := q.base[i].Add(fb); u.After(now) && u.After(q.until[i]) {
			q.until[i], q.last[i], q.bound[i] = u, u, bound
		}
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
		var qe *QuarantineError
		if v.Discounted && !v.Done && errors.As(c.q.discount(i), &qe) {
			n++
		}
	}
	return n
}
