package redlockotel

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe"
)

// Span attribute keys (besides KeyOp, KeyOutcome, KeyErrorType and the
// server.* keys).
const (
	KeyKey        = attribute.Key("redlock.key")  // a single-key lock's key
	KeyKeys       = attribute.Key("redlock.keys") // a multi-key lock's keys
	KeyNeed       = attribute.Key("redlock.quorum.need")
	KeyGot        = attribute.Key("redlock.quorum.got")
	KeyAttempts   = attribute.Key("redlock.attempts")
	KeyRemaining  = attribute.Key("redlock.remaining") // seconds of validity left
	KeyPassed     = attribute.Key("redlock.passed")
	KeyToken      = attribute.Key("redlock.token")
	KeyKind       = attribute.Key("redlock.kind") // the lock's type, when not plain
	KeyVote       = attribute.Key("redlock.node.vote")
	KeyLatency    = attribute.Key("redlock.node.latency") // seconds from the start of the round to the answer
	KeyNodeError  = attribute.Key("redlock.node.error")
	KeyDiscounted = attribute.Key("redlock.node.discounted")
	// KeyPending marks a node that had not answered when the round was
	// decided (the quorum was reached, or became impossible, without it):
	// a slower node, not a failed one.
	KeyPending = attribute.Key("redlock.node.pending")
	// KeySkipped marks a node left out of the round because its last call
	// timed out (observe.ErrNodeSkipped): nothing was sent to it.
	KeySkipped = attribute.Key("redlock.node.skipped")
)

// NodeEventName is the name of the span event of one node's answer.
const NodeEventName = "redlock.node"

// Tracer turns a Client's operations into OpenTelemetry spans. It is
// separate from Metrics so that each is paid for only when asked for. The
// zero Tracer records nothing. Its methods are safe for concurrent use;
// one Tracer may observe several Clients.
type Tracer struct {
	tracer trace.Tracer
}

// NewTracer returns a Tracer creating its spans with tp; a nil tp means
// the global provider, otel.GetTracerProvider().
func NewTracer(tp trace.TracerProvider) *Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return &Tracer{tracer: tp.Tracer(ScopeName, trace.WithInstrumentationVersion(scopeVersion()))}
}

// Options returns the redlock.Client option that feeds this Tracer: its
// Observe as an observer. Add it to the Metrics' with append.
func (t *Tracer) Options() []redlock.Option {
	return []redlock.Option{redlock.WithObserver(t.Observe)}
}

// spanName is the name of an operation's span.
func spanName(op observe.Op) string {
	switch op {
	case observe.OpAcquire:
		return "redlock.acquire"
	case observe.OpExtend:
		return "redlock.extend"
	case observe.OpRenew:
		return "redlock.renew"
	case observe.OpRelease:
		return "redlock.release"
	case observe.OpLost:
		return "redlock.lost"
	}
	return "redlock." + string(op)
}

// Observe records one operation as a span that ends now and began
// e.Elapsed ago, a child of the span in e.Context (the caller's; none for
// watchdog renewals and losses found in the background), with one span
// event per node of the last round. It is the observer passed to
// redlock.WithObserver (see Options).
func (t *Tracer) Observe(e observe.Event) {
	if t == nil || t.tracer == nil {
		return
	}
	ctx := e.Context
	if ctx == nil {
		ctx = context.Background()
	}
	now := time.Now()
	_, span := t.tracer.Start(ctx, spanName(e.Op), trace.WithTimestamp(now.Add(-e.Elapsed)))
	if !span.IsRecording() { // sampled out: nothing more to build
		span.End(trace.WithTimestamp(now))
		return
	}
	span.SetAttributes(spanAttrs(e)...)
	var at trace.SpanEndEventOption = trace.WithTimestamp(now)      // one option for every event and End
	buf := make([]attribute.KeyValue, 0, maxNodeAttrs*len(e.Nodes)) // one backing array for all events
	for _, n := range e.Nodes {
		start := len(buf)
		buf = appendNodeAttrs(buf, n)
		span.AddEvent(NodeEventName, at, trace.WithAttributes(buf[start:len(buf):len(buf)]...))
	}
	if failed(e) {
		span.SetStatus(codes.Error, e.Err.Error())
	}
	span.End(at)
}

// failed reports whether e's span has status Error: every operation that
// returned an error, except an acquisition that found the key held by
// another client (outcome held). That is the answer TryLock exists to
// give, not a failure of the nodes or the library; counting it as an
// error would make a contended key look like an outage.
func failed(e observe.Event) bool {
	return e.Err != nil && Outcome(e) != "held"
}

// spanAttrs returns the attributes of e's span.
func spanAttrs(e observe.Event) []attribute.KeyValue {
	kv := make([]attribute.KeyValue, 0, 10)
	if len(e.Keys) == 1 {
		kv = append(kv, KeyKey.String(e.Keys[0]))
	} else {
		kv = append(kv, KeyKeys.StringSlice(e.Keys))
	}
	outcome := Outcome(e)
	kv = append(kv, KeyOp.String(string(e.Op)), KeyOutcome.String(outcome))
	if failed(e) {
		kv = append(kv, KeyErrorType.String(outcome))
	}
	var qe *redlock.QuorumError
	if errors.As(e.Err, &qe) {
		kv = append(kv, KeyNeed.Int(qe.Need), KeyGot.Int(qe.Got))
	} else if len(e.Nodes) > 0 {
		kv = append(kv, KeyGot.Int(counted(e.Nodes)))
	}
	if e.Op != observe.OpLost {
		kv = append(kv, KeyAttempts.Int(e.Attempts), KeyRemaining.Float64(e.Remaining.Seconds()))
	}
	if e.Op == observe.OpAcquire {
		kv = append(kv, KeyPassed.Bool(e.Passed))
	}
	if e.Lock != nil && e.Lock.Token() != 0 { // nil when an acquisition failed
		kv = append(kv, KeyToken.Int64(e.Lock.Token()))
	}
	if e.Kind != "" && e.Kind != observe.KindPlain {
		kv = append(kv, KeyKind.String(string(e.Kind)))
	}
	return kv
}

// counted is the number of yes votes that counted toward the quorum.
func counted(nodes []observe.NodeResult) int {
	n := 0
	for _, r := range nodes {
		if r.Vote && r.Discounted == nil {
			n++
		}
	}
	return n
}

// maxNodeAttrs is the most attributes appendNodeAttrs adds.
const maxNodeAttrs = 7

// appendNodeAttrs appends the attributes of one node's span event to kv:
// error.type and redlock.node.error only for a call that failed; a node
// that had not answered when the round was decided, or was not asked, is
// marked as such and carries no error.
func appendNodeAttrs(kv []attribute.KeyValue, n observe.NodeResult) []attribute.KeyValue {
	kv = appendServer(kv, n.Addr)
	kv = append(kv, KeyVote.Bool(n.Vote), KeyLatency.Float64(n.Latency.Seconds()))
	switch {
	case n.Err == nil:
	case errors.Is(n.Err, observe.ErrPending):
		kv = append(kv, KeyPending.Bool(true))
	case errors.Is(n.Err, observe.ErrNodeSkipped):
		kv = append(kv, KeySkipped.Bool(true))
	default:
		kv = append(kv, KeyNodeError.String(n.Err.Error()), KeyErrorType.String(errorType(n.Timeout())))
	}
	if n.Discounted != nil {
		kv = append(kv, KeyDiscounted.String(n.Discounted.Error()))
	}
	return kv
}

// errorType is the error.type of a failed node call.
func errorType(timeout bool) string {
	if timeout {
		return "timeout"
	}
	return "error"
}
