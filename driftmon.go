package redlock

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/redlock-go/redlock/clock"
	"github.com/redlock-go/redlock/internal/drift"
	"github.com/redlock-go/redlock/observe"
)

// Drift is how a Client allows for the nodes' clocks running at other
// rates than its own (WithDrift). Its zero value is the default: a drift
// factor of 0.01 and no monitor.
type Drift struct {
	// Factor is the share of the TTL set aside for clock drift between
	// client and nodes (0: 0.01, as in the Redlock reference). It must
	// cover the largest relative clock-rate error you expect: the lock is
	// safe while Factor >= 1 - clientRate/nodeRate.
	Factor float64
	// Monitor, if not zero, turns on the clock-drift monitor. Every
	// Monitor on the Client's clock, one goroutine of the Client sends
	// TIME to every node at once (each call bounded by the node timeout)
	// and estimates from the answers how fast each node's clock runs
	// against the Client's (see package drift). A node is out of bounds
	// once its estimated 1 - clientRate/nodeRate exceeds Factor, or when
	// its clock jumped, until its rate is estimated within bounds again; a
	// node whose rate is not yet known counts as within bounds. Each
	// change is logged (Warn when out, Info when back) and counted
	// (Client.Stats().Drift). The first TIME goes out Monitor after New;
	// Close stops the monitor and waits for it. The monitor is not run
	// over cluster clients (TIME reaches an arbitrary shard).
	Monitor time.Duration
	// Exclude makes the monitor discount the vote of a node whose clock
	// is out of bounds: its yes does not count toward the quorum (it still
	// receives every command), and a round's
	// observe.NodeResult.Discounted then matches observe.ErrClockDrift.
	// Without it the monitor only reports. It needs Monitor.
	Exclude bool
}

// WithDrift sets the drift budget and the drift monitor (see Drift;
// default: a factor of 0.01, no monitor). A zero field keeps what it set;
// New refuses a Factor outside [0, 1), a negative Monitor, and Exclude
// without Monitor.
func WithDrift(d Drift) Option {
	return clientOption(func(o *options) {
		set(&o.driftFactor, d.Factor)
		if d.Monitor != 0 {
			o.driftOn, o.driftEvery = true, d.Monitor
		}
		if d.Exclude {
			o.driftExclude = true
		}
	})
}

// driftMon is the drift monitor and, with exclude, the gate of
// out-of-bounds nodes.
type driftMon struct {
	c      *Client
	every  time.Duration
	origin time.Time // the Client's clock at New: samples are taken since
	done   chan struct{}
	mu     sync.Mutex
	est    []*drift.Estimator
	out    []*observe.DriftError // per node: why it is out of bounds; nil when not
	stats  observe.DriftStats    // counters only (Nodes unset)
}

// setupDrift makes the monitor (and gate) when WithDrift is on;
// startDrift starts it.
func (c *Client) setupDrift() {
	if !c.o.driftOn || c.cluster {
		return
	}
	tol := math.Max(c.o.driftFactor/2, 1e-4)
	m := &driftMon{c: c, every: c.o.driftEvery, origin: c.o.clock.Now(), done: make(chan struct{}),
		est: make([]*drift.Estimator, len(c.nodes)), out: make([]*observe.DriftError, len(c.nodes))}
	for i := range m.est {
		m.est[i] = drift.New(drift.Config{Tolerance: tol})
	}
	c.dm = m
	if c.o.driftExclude {
		c.gates = append(c.gates, m)
	}
}

func (c *Client) startDrift() {
	if c.dm != nil {
		go c.dm.run()
	}
}

// run samples every m.every on the Client's clock until Close.
func (m *driftMon) run() {
	defer close(m.done)
	for {
		tick := make(chan struct{})
		stop := clock.AfterFunc(m.c.o.clock, m.every, func() { close(tick) })
		select {
		case <-m.c.closing.Done():
			stop()
			return
		case <-tick:
		}
		m.round()
	}
}

// wait returns once run has (Close cancelled closing first).
func (m *driftMon) wait() {
	if m != nil {
		<-m.done
	}
}

// round sends TIME to every node at once and feeds the answers.
func (m *driftMon) round() {
	ctx, cancel := context.WithTimeout(m.c.closing, m.c.o.nodeTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i := range m.c.nodes {
		wg.Add(1)
		go func(i int) { defer wg.Done(); m.sample(ctx, i) }(i)
	}
	wg.Wait()
}

func (m *driftMon) sample(ctx context.Context, i int) {
	clk := m.c.o.clock
	sent := clk.Now()
	t, err := m.c.nodes[i].Time(ctx)
	rtt := clk.Now().Sub(sent)
	if err != nil {
		m.mu.Lock()
		m.stats.Failures++
		m.mu.Unlock()
		return
	}
	m.feed(i, drift.Sample{Client: sent.Sub(m.origin), Node: t, RTT: rtt})
}

// feed adds s to node i's estimator, judges the node again, and logs a
// change of state.
func (m *driftMon) feed(i int, s drift.Sample) {
	m.mu.Lock()
	e := m.est[i]
	jumps := e.Jumps()
	e.Add(s)
	m.stats.Samples++
	m.stats.Jumps += uint64(e.Jumps() - jumps)
	prev := m.out[i]
	now := m.judge(i)
	m.out[i] = now
	if prev == nil && now != nil {
		m.stats.Flagged++
	}
	drift := e.Error()
	m.mu.Unlock()
	m.logChange(i, prev, now, drift)
}

// judge returns why node i is out of bounds now, or nil. A node out of
// bounds stays out while its rate is not known (after a jump, or while
// the bound is too wide). m.mu held.
func (m *driftMon) judge(i int) *observe.DriftError {
	e, f := m.est[i], m.c.o.driftFactor
	if e.Jumped() {
		return &observe.DriftError{Addr: m.c.nodes[i].Addr(), Budget: f, Jump: e.LastJump()}
	}
	if _, ok := e.Rate(); !ok {
		return m.out[i]
	}
	if d := e.Error(); d > f {
		return &observe.DriftError{Addr: m.c.nodes[i].Addr(), Drift: d, Budget: f}
	}
	return nil
}

func (m *driftMon) logChange(i int, prev, now *observe.DriftError, drift float64) {
	lg := m.c.o.logger
	if lg == nil || (prev == nil) == (now == nil) {
		return
	}
	attrs := []slog.Attr{slog.String("client", m.c.id), slog.String("node", m.c.nodes[i].Addr()),
		slog.Float64("drift", drift), slog.Float64("budget", m.c.o.driftFactor)}
	if now == nil {
		lg.LogAttrs(context.Background(), slog.LevelInfo, "redlock: node clock back within the drift budget", attrs...)
		return
	}
	if now.Jump != 0 {
		attrs = append(attrs, slog.Duration("jump", now.Jump))
	}
	attrs = append(attrs, slog.Bool("excluded", m.c.o.driftExclude))
	lg.LogAttrs(context.Background(), slog.LevelWarn, "redlock: node clock outside the drift budget", attrs...)
}

// discount is the gate (exclude only): an out-of-bounds node's vote does
// not count.
func (m *driftMon) discount(i int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.out[i]; e != nil {
		return e
	}
	return nil
}

// driftStats returns what the drift monitor has seen so far; the zero
// observe.DriftStats when it is off (see WithDrift).
func (c *Client) driftStats() observe.DriftStats {
	m := c.dm
	if m == nil {
		return observe.DriftStats{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stats
	s.Nodes = make([]observe.NodeDrift, len(m.est))
	for i, e := range m.est {
		r, ok := e.Rate()
		s.Nodes[i] = observe.NodeDrift{Addr: c.nodes[i].Addr(), Known: ok, Rate: r, Drift: e.Error(), Bound: e.Bound()}
		if m.out[i] != nil {
			s.Nodes[i].Out = m.out[i]
		}
	}
	return s
}
