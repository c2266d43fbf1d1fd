// Package redlockotel records the operations of a redlock.Client as
// OpenTelemetry metrics and, if asked, trace spans. It is its own module so
// that the lock library does not depend on an OpenTelemetry SDK; this
// package uses only the metric and trace APIs, and the application picks
// the SDK and exporter (Prometheus, OTLP, ...).
//
// Wire it in through the Client's observer hooks:
//
//	m, err := redlockotel.New(redlockotel.WithMeterProvider(provider))
//	...
//	defer m.Close()
//	c, err := redlock.NewFromURLs(urls, m.Options()...)
//
// # Instruments
//
//	redlock.acquire.duration  histogram, s        Lock/TryLock calls by redlock.outcome
//	redlock.acquire.attempts  histogram, {attempt} rounds per call by redlock.outcome
//	redlock.renewals          counter, {renewal}  Extend calls by redlock.outcome
//	redlock.releases          counter, {release}  Release calls by redlock.outcome
//	redlock.locks.lost        counter, {lock}     locks found lost, by redlock.op
//	redlock.locks.held        updowncounter, {lock} locks held now (acquired, not released, validity left)
//	redlock.node.duration     histogram, s        every node call's answer time by server.address, server.port, redlock.op
//	redlock.node.errors       counter, {error}    failed node calls by server.address, server.port, redlock.op, error.type
//	redlock.drift.flagged     counter, {change}   nodes found outside the drift budget (Clients added with Watch)
//	redlock.drift.out         updowncounter, {node} nodes outside the drift budget now (Clients added with Watch)
//	redlock.quarantine.started counter, {node}    restart quarantines begun (Clients added with Watch)
//	redlock.quarantine.nodes  updowncounter, {node} nodes in restart quarantine now (Clients added with Watch)
//
// The meter and the tracer are named ScopeName and carry this module's
// version as their instrumentation scope's version. Attributes follow the
// OpenTelemetry semantic conventions where one applies: a node is
// server.address and server.port, error.type is set only where something
// failed, durations are in seconds.
//
// redlock.outcome is, for acquisitions: acquired; held (enough nodes said
// no: someone else holds the key); unavailable (too few nodes answered);
// validity_expired (a quorum answered, too late to use); canceled or
// deadline (the caller's ctx ended the call); wrong_type (a typed lock on a
// key of another type: see redlock.ErrWrongType). For renewals: extended,
// not_extended (nodes failed; the lock stays valid to its deadline), lost,
// not_held (released before), canceled. For releases: released, not_held.
//
// redlock.locks.lost counts an Extend that found the lock lost (op=extend)
// and a Release called after the lock's validity had run out (op=release):
// the holder kept working past its deadline, where another client may
// already have held the lock.
//
// The node instruments count every node call when it ends, also the calls
// that end after their round was decided (a round returns at quorum and does
// not wait for a slow or frozen node; that node's timeouts show here).
// error.type is timeout (the per-node deadline passed) or error (anything
// else: refused connection, wrong password, script error). A node call is
// not cut short when the caller's ctx ends, so its error is the node's. redlock.op is acquire, extend
// or release (release includes the clean-up after a failed attempt).
//
// Durations are taken from the Client's clock (monotonic by default).
//
// # Tracing
//
// Spans are opt-in, from a Tracer of their own (a Client with metrics only
// builds no spans):
//
//	tr := redlockotel.NewTracer(tp) // nil: otel.GetTracerProvider()
//	c, err := redlock.NewFromURLs(urls, append(m.Options(), tr.Options()...)...)
//
// Each operation becomes one span when it ends: redlock.acquire (Lock,
// TryLock and their multi-key forms), redlock.extend, redlock.release,
// redlock.renew (a watchdog renewal) and redlock.lost (the lock ended
// without Release; a span of no duration). A span starts Event.Elapsed
// before it is built (the call's time, retries included) and is a child of
// the span in the caller's ctx, also when its node calls went out in a
// pipeline shared with other callers; renewals and losses found in the
// background have no parent. Attributes: redlock.key (one key) or
// redlock.keys, redlock.op, redlock.outcome, redlock.quorum.need and
// redlock.quorum.got (from the QuorumError of a failed call; on success
// got only: the yes votes that counted), redlock.attempts,
// redlock.remaining (seconds), redlock.passed (acquisitions),
// redlock.token (with fencing).
//
// Status: a failed call has status Error with its error's message and
// error.type set to its outcome (unavailable, deadline, canceled,
// validity_expired, lost, not_held, ...). An acquisition whose outcome is
// held (enough nodes hold the key for another client: TryLock's "no")
// is not a failure: its status stays Unset and it has no error.type, so a
// contended key does not show up as an error rate.
//
// Each node of the last round is a span event named redlock.node with
// server.address, server.port, redlock.node.vote and redlock.node.latency
// (seconds from the start of the round). A node call that failed adds
// redlock.node.error and error.type (timeout or error); a node that had
// not answered when the round was decided is redlock.node.pending (a
// slower node, not an error), one left out after a timeout
// redlock.node.skipped; redlock.node.discounted says why a yes did not
// count. Node calls that end after their round was decided are not in the
// span (see the redlock.node.* metrics).
package redlockotel

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe"
)

// ScopeName is the instrumentation scope of the meter.
const ScopeName = "github.com/redlock-go/redlock/redlockotel"

// Attribute keys.
const (
	KeyOutcome   = attribute.Key("redlock.outcome")
	KeyOp        = attribute.Key("redlock.op")
	KeyErrorType = attribute.Key("error.type")
	KeyCause     = attribute.Key("redlock.cause")
)

// Option configures New.
type Option func(*config)

type config struct {
	provider metric.MeterProvider
}

// WithMeterProvider sets where the instruments are created (default: the
// global provider, otel.GetMeterProvider()).
func WithMeterProvider(p metric.MeterProvider) Option {
	return func(c *config) { c.provider = p }
}

// Metrics records redlock events. Its methods are safe for concurrent use;
// one Metrics may observe several Clients.
type Metrics struct {
	acquireDur metric.Float64Histogram
	attempts   metric.Int64Histogram
	renewals   metric.Int64Counter
	releases   metric.Int64Counter
	lost       metric.Int64Counter
	nodeErrors metric.Int64Counter
	nodeDur    metric.Float64Histogram
	reg        metric.Registration

	outcomes map[string]metric.MeasurementOption // every value Outcome returns; read-only after New
	lostOpts map[string]metric.MeasurementOption // by op: extend, release
	nodeOpts sync.Map                            // nodeKey -> metric.MeasurementOption

	mu       sync.Mutex
	clients  []*redlock.Client // whose hand-off counters are reported (Watch)
	held     map[*redlock.Lock]struct{}
	pruneAt  int // size of held at which expired entries are dropped
	closed   bool
	closeErr error
}

type nodeKey struct{ node, op, typ string }

// Acquisition latencies run from a few hundred microseconds (a healthy
// quorum on a LAN) to the caller's ctx (blocking Lock under contention).
var durationBounds = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

var attemptBounds = []float64{1, 2, 3, 5, 10, 20, 50, 100}

// One node call: loopback answers in tens of microseconds, the node timeout
// is 50ms by default, releases may take up to ten of those.
var nodeBounds = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}

// New creates the instruments. It fails only if the meter provider refuses
// them.
func New(opts ...Option) (*Metrics, error) {
	cfg := config{}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("redlockotel: nil option")
		}
		o(&cfg)
	}
	if cfg.provider == nil {
		cfg.provider = otel.GetMeterProvider()
	}
	meter := cfg.provider.Meter(ScopeName, metric.WithInstrumentationVersion(scopeVersion()))
	m := &Metrics{held: map[*redlock.Lock]struct{}{}, pruneAt: 64,
		outcomes: map[string]metric.MeasurementOption{}, lostOpts: map[string]metric.MeasurementOption{}}
	for _, o := range outcomes {
		m.outcomes[o] = metric.WithAttributeSet(attribute.NewSet(KeyOutcome.String(o)))
	}
	for _, op := range []string{"extend", "renew", "expire", "max_hold", "release"} {
		m.lostOpts[op] = metric.WithAttributeSet(attribute.NewSet(KeyOp.String(op)))
	}
	var err, e error
	m.acquireDur, e = meter.Float64Histogram("redlock.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("Time of Lock and TryLock calls, retries included, by outcome."),
		metric.WithExplicitBucketBoundaries(durationBounds...))
	err = errors.Join(err, e)
	m.attempts, e = meter.Int64Histogram("redlock.acquire.attempts", metric.WithUnit("{attempt}"),
		metric.WithDescription("Rounds made by one Lock or TryLock call, by outcome."),
		metric.WithExplicitBucketBoundaries(attemptBounds...))
	err = errors.Join(err, e)
	m.renewals, e = meter.Int64Counter("redlock.renewals", metric.WithUnit("{renewal}"),
		metric.WithDescription("Extend calls, by outcome."))
	err = errors.Join(err, e)
	m.releases, e = meter.Int64Counter("redlock.releases", metric.WithUnit("{release}"),
		metric.WithDescription("Release calls, by outcome."))
	err = errors.Join(err, e)
	m.lost, e = meter.Int64Counter("redlock.locks.lost", metric.WithUnit("{lock}"),
		metric.WithDescription("Locks found lost by Extend, or released after their validity had run out."))
	err = errors.Join(err, e)
	m.nodeErrors, e = meter.Int64Counter("redlock.node.errors", metric.WithUnit("{error}"),
		metric.WithDescription("Node calls that failed or timed out, by node, operation and error type."))
	err = errors.Join(err, e)
	m.nodeDur, e = meter.Float64Histogram("redlock.node.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from the start of a round to one node's answer, also after the round was decided."),
		metric.WithExplicitBucketBoundaries(nodeBounds...))
	err = errors.Join(err, e)
	held, e := meter.Int64ObservableUpDownCounter("redlock.locks.held", metric.WithUnit("{lock}"),
		metric.WithDescription("Locks acquired and not released whose validity has not run out."))
	err = errors.Join(err, e)
	wakeups, e := meter.Int64ObservableCounter("redlock.handoff.wakeups", metric.WithUnit("{wakeup}"),
		metric.WithDescription("Waits of Lock calls that ended, by cause: a node's release notification (notified), a release by the same Client (local), the previous waiter leaving (promoted), the backoff timer (timer). Clients added with Watch."))
	err = errors.Join(err, e)
	passed, e := meter.Int64ObservableCounter("redlock.handoff.passed", metric.WithUnit("{lock}"),
		metric.WithDescription("Locks passed from a Release to the next waiting Lock call of the same Client, with no round trip. Clients added with Watch."))
	err = errors.Join(err, e)
	flagged, e := meter.Int64ObservableCounter("redlock.drift.flagged", metric.WithUnit("{change}"),
		metric.WithDescription("Times the drift monitor found a node's clock outside the drift budget (see redlock.WithDrift). Clients added with Watch."))
	err = errors.Join(err, e)
	out, e := meter.Int64ObservableUpDownCounter("redlock.drift.out", metric.WithUnit("{node}"),
		metric.WithDescription("Nodes whose clock the drift monitor finds outside the drift budget now. Clients added with Watch."))
	err = errors.Join(err, e)
	qStarted, e := meter.Int64ObservableCounter("redlock.quarantine.started", metric.WithUnit("{node}"),
		metric.WithDescription("Restart quarantines begun: a node restarted (or failed over) without appendfsync always, and its vote did not count for one window (see redlock.WithRestartQuarantine). Clients added with Watch."))
	err = errors.Join(err, e)
	qNow, e := meter.Int64ObservableUpDownCounter("redlock.quarantine.nodes", metric.WithUnit("{node}"),
		metric.WithDescription("Nodes in restart quarantine now. Clients added with Watch."))
	err = errors.Join(err, e)
	if err != nil {
		return nil, fmt.Errorf("redlockotel: %w", err)
	}
	causes := map[string]metric.ObserveOption{}
	for _, c := range []string{"notified", "local", "promoted", "timer"} {
		causes[c] = metric.WithAttributeSet(attribute.NewSet(KeyCause.String(c)))
	}
	m.reg, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(held, int64(m.Held()))
		s := m.handoff()
		for c, n := range map[string]uint64{"notified": s.Notified, "local": s.Local, "promoted": s.Promoted, "timer": s.Timer} {
			o.ObserveInt64(wakeups, int64(n), causes[c])
		}
		o.ObserveInt64(passed, int64(s.Handed))
		f, n := m.drift()
		o.ObserveInt64(flagged, int64(f))
		o.ObserveInt64(out, int64(n))
		qs, qn := m.quarantine()
		o.ObserveInt64(qStarted, int64(qs))
		o.ObserveInt64(qNow, int64(qn))
		return nil
	}, held, wakeups, passed, flagged, out, qStarted, qNow)
	if err != nil {
		return nil, fmt.Errorf("redlockotel: %w", err)
	}
	return m, nil
}

// Options returns the redlock.Client options that feed this Metrics: its
// Observe and ObserveNode as observers. Add your own with append.
func (m *Metrics) Options() []redlock.Option {
	return []redlock.Option{redlock.WithObserver(m.Observe), redlock.WithNodeObserver(m.ObserveNode)}
}

// Watch adds c's hand-off counters (redlock.Client.Stats().Handoff) to the
// redlock.handoff.* instruments, summed over every Client watched. Call it
// once per Client, after redlock.New or NewFromURLs.
func (m *Metrics) Watch(c *redlock.Client) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.clients = append(m.clients, c)
}

// handoff sums the watched Clients' hand-off counters.
func (m *Metrics) handoff() observe.HandoffStats {
	var sum observe.HandoffStats
	for _, c := range m.watched() {
		s := c.Stats().Handoff
		sum.Notified += s.Notified
		sum.Local += s.Local
		sum.Promoted += s.Promoted
		sum.Timer += s.Timer
		sum.Handed += s.Handed
	}
	return sum
}

// Close unregisters the held-locks gauge. Later events are ignored.
func (m *Metrics) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.closed {
		m.closed = true
		m.closeErr = m.reg.Unregister()
		m.held = nil
	}
	return m.closeErr
}

// Held returns how many observed locks are held now: acquired, not
// released or found lost, validity left.
func (m *Metrics) Held() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.prune()
	return len(m.held)
}

// prune drops locks whose validity ran out without a release. m.mu held.
func (m *Metrics) prune() {
	for l := range m.held {
		if l.Remaining() <= 0 {
			delete(m.held, l)
		}
	}
	m.pruneAt = 2*len(m.held) + 64
}

// Observe records one operation. It is the observer passed to
// redlock.WithObserver (see Options).
func (m *Metrics) Observe(e observe.Event) {
	ctx := context.Background()
	outcome := Outcome(e)
	switch e.Op {
	case "acquire":
		m.acquireDur.Record(ctx, e.Elapsed.Seconds(), m.outcomes[outcome])
		if e.Attempts > 0 {
			m.attempts.Record(ctx, int64(e.Attempts), m.outcomes[outcome])
		}
		if e.Err == nil && e.Lock != nil {
			m.track(e.Lock, true)
		}
	case "extend", "renew":
		m.renewals.Add(ctx, 1, m.outcomes[outcome])
		if outcome == "not_held" {
			m.track(e.Lock, false)
		}
	case "lost":
		m.lost.Add(ctx, 1, m.lostOpts[lostBy(e.Err)])
		m.track(e.Lock, false)
	case "release":
		m.releases.Add(ctx, 1, m.outcomes[outcome])
		// A release after the deadline: the holder worked past its
		// validity (unless the loss was already counted when it happened).
		if e.Attempts > 0 && e.Remaining <= 0 && e.Lock != nil && !errors.Is(e.Lock.Err(), redlock.ErrLockLost) {
			m.lost.Add(ctx, 1, m.lostOpts["release"])
		}
		m.track(e.Lock, false)
	}
}

// lostBy names how a lock was lost, for the redlock.op attribute of
// redlock.locks.lost: "extend" or "renew" (the call found a quorum no
// longer holds it), "max_hold" (the watchdog stopped at WithMaxHold),
// "expire" (the validity ran out before a renewal succeeded).
func lostBy(err error) string {
	var qe *redlock.QuorumError
	switch {
	case errors.As(err, &qe) && qe.Op == "renew":
		return "renew"
	case qe != nil:
		return "extend"
	case errors.Is(err, redlock.ErrMaxHold):
		return "max_hold"
	}
	return "expire"
}

// ObserveNode records one node call. It is the observer passed to
// redlock.WithNodeObserver (see Options).
func (m *Metrics) ObserveNode(e observe.NodeEvent) {
	ctx := context.Background()
	m.nodeDur.Record(ctx, e.Latency.Seconds(), m.nodeOpt(e.Addr, string(e.Op), ""))
	if typ := nodeErrorType(e); typ != "" {
		m.nodeErrors.Add(ctx, 1, m.nodeOpt(e.Addr, string(e.Op), typ))
	}
}

func (m *Metrics) track(lk observe.Lock, add bool) {
	l, ok := lk.(*redlock.Lock)
	if !ok || l == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held == nil { // closed
		return
	}
	if !add {
		delete(m.held, l)
		return
	}
	m.held[l] = struct{}{}
	if len(m.held) >= m.pruneAt { // bounded even if nobody reads the gauge
		m.prune()
	}
}

// nodeOpt returns the attribute option for a node and operation, with an
// error type unless typ is "", built once.
func (m *Metrics) nodeOpt(node, op, typ string) metric.MeasurementOption {
	k := nodeKey{node, op, typ}
	if v, ok := m.nodeOpts.Load(k); ok {
		return v.(metric.MeasurementOption)
	}
	kv := appendServer(make([]attribute.KeyValue, 0, 4), node)
	kv = append(kv, KeyOp.String(op))
	if typ != "" {
		kv = append(kv, KeyErrorType.String(typ))
	}
	v, _ := m.nodeOpts.LoadOrStore(k, metric.WithAttributeSet(attribute.NewSet(kv...)))
	return v.(metric.MeasurementOption)
}

// watched returns the Clients added with Watch, as they are now.
func (m *Metrics) watched() []*redlock.Client {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*redlock.Client(nil), m.clients...)
}
