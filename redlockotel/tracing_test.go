package redlockotel

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe"
)

// newTracer returns a Tracer recording into a span recorder, and a tracer
// of the same provider for parent spans.
func newTracer(t *testing.T, opts ...sdktrace.TracerProviderOption) (*Tracer, trace.Tracer, *tracetest.SpanRecorder) {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(append(opts, sdktrace.WithSpanProcessor(sr))...)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return NewTracer(tp), tp.Tracer("test"), sr
}

func attrMap(kv []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, a := range kv {
		m[a.Key] = a.Value
	}
	return m
}

// TestTracerSpans feeds synthetic events and checks the spans: parent,
// name, times, attributes, status, one event per node.
func TestTracerSpans(t *testing.T) {
	tr, parentTracer, sr := newTracer(t)
	ctx, parent := parentTracer.Start(context.Background(), "caller")

	res := nodes("yes", "no", "timeout", "yes", "yes")
	res[3].Discounted = observe.ErrNodeQuarantined
	tr.Observe(observe.Event{Context: ctx, Op: observe.OpAcquire, Keys: []string{"k"}, Attempts: 2,
		Elapsed: 1500 * time.Millisecond, Remaining: 9 * time.Second, Nodes: res})
	held := qerr("acquire", redlock.ErrNotObtained, nil, 3, nodes("yes", "no", "no", "no", "no"))
	tr.Observe(observe.Event{Context: ctx, Op: observe.OpAcquire, Keys: []string{"k"}, Attempts: 1, Err: held, Nodes: held.Nodes})
	tr.Observe(observe.Event{Context: context.Background(), Op: observe.OpRenew, Keys: []string{"a", "b"}, Attempts: 1, Kind: observe.KindRead,
		Remaining: time.Second, Nodes: nodes("yes", "yes", "yes")})
	tr.Observe(observe.Event{Op: observe.OpLost, Keys: []string{"k"}, Err: redlock.ErrLockLost}) // nil Context
	parent.End()

	spans := sr.Ended()
	if len(spans) != 5 {
		t.Fatalf("%d spans ended, want 5", len(spans))
	}
	ok, failed, renew, lost := spans[0], spans[1], spans[2], spans[3]

	for _, s := range []sdktrace.ReadOnlySpan{ok, failed} {
		if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
			t.Errorf("%s: parent %v, want the caller's span %v", s.Name(), s.Parent().SpanID(), parent.SpanContext().SpanID())
		}
	}
	for _, s := range []sdktrace.ReadOnlySpan{renew, lost} {
		if s.Parent().IsValid() {
			t.Errorf("%s: parent %v, want none (background)", s.Name(), s.Parent().SpanID())
		}
	}
	for s, want := range map[sdktrace.ReadOnlySpan]string{ok: "redlock.acquire", failed: "redlock.acquire", renew: "redlock.renew", lost: "redlock.lost"} {
		if s.Name() != want {
			t.Errorf("span name %q, want %q", s.Name(), want)
		}
	}
	if d := ok.EndTime().Sub(ok.StartTime()); d != 1500*time.Millisecond {
		t.Errorf("acquire span lasts %v, want Elapsed (1.5s)", d)
	}

	a := attrMap(ok.Attributes())
	wantAttrs := map[attribute.Key]attribute.Value{
		KeyKey: attribute.StringValue("k"), KeyOp: attribute.StringValue("acquire"), KeyOutcome: attribute.StringValue("acquired"),
		KeyGot: attribute.IntValue(2), KeyAttempts: attribute.IntValue(2), KeyRemaining: attribute.Float64Value(9),
		KeyPassed: attribute.BoolValue(false),
	}
	for k, v := range wantAttrs {
		if a[k] != v {
			t.Errorf("acquire span: %s = %v, want %v", k, a[k].Emit(), v.Emit())
		}
	}
	for _, k := range []attribute.Key{KeyNeed, KeyToken, KeyKeys, KeyKind} {
		if _, has := a[k]; has {
			t.Errorf("acquire span has %s", k)
		}
	}
	if ok.Status().Code != codes.Unset {
		t.Errorf("acquire span status %v", ok.Status())
	}
	evs := ok.Events()
	if len(evs) != 5 {
		t.Fatalf("acquire span has %d events, want 5 (one per node)", len(evs))
	}
	for i, ev := range evs {
		na := attrMap(ev.Attributes)
		if ev.Name != NodeEventName || na[KeyServerAddress].AsString()+":"+na[KeyServerPort].Emit() != res[i].Addr || na[KeyVote].AsBool() != res[i].Vote {
			t.Errorf("event %d: %s %v", i, ev.Name, ev.Attributes)
		}
	}
	if na := attrMap(evs[2].Attributes); na[KeyErrorType].AsString() != "timeout" || na[KeyNodeError].AsString() == "" {
		t.Errorf("timed-out node's event: %v", evs[2].Attributes)
	}
	if na := attrMap(evs[3].Attributes); na[KeyDiscounted].AsString() != observe.ErrNodeQuarantined.Error() {
		t.Errorf("discounted node's event: %v", evs[3].Attributes)
	}
	if _, has := attrMap(evs[0].Attributes)[KeyNodeError]; has {
		t.Errorf("healthy node's event has an error: %v", evs[0].Attributes)
	}

	f := attrMap(failed.Attributes())
	if f[KeyNeed].AsInt64() != 3 || f[KeyGot].AsInt64() != 1 || f[KeyOutcome].AsString() != "held" {
		t.Errorf("failed acquire: need %v got %v outcome %v", f[KeyNeed].Emit(), f[KeyGot].Emit(), f[KeyOutcome].Emit())
	}
	if failed.Status().Code != codes.Unset || f[KeyErrorType].Type() != attribute.INVALID {
		t.Errorf("acquire that found the key held: status %v, error.type %v; want Unset and none (an expected answer)", failed.Status(), f[KeyErrorType].Emit())
	}
	if r := attrMap(renew.Attributes()); len(r[KeyKeys].AsStringSlice()) != 2 || r[KeyKind].AsString() != "read" {
		t.Errorf("renew span keys %v, kind %v", r[KeyKeys].Emit(), r[KeyKind].Emit())
	}
	if l := attrMap(lost.Attributes()); lost.Status().Code != codes.Error || len(lost.Events()) != 0 || l[KeyAttempts].Type() != attribute.INVALID {
		t.Errorf("lost span: status %v, %d events, attrs %v", lost.Status(), len(lost.Events()), lost.Attributes())
	}
}

// TestTracerOff: the zero Tracer, a nil one and a sampled-out span record
// nothing and do not fail.
func TestTracerOff(t *testing.T) {
	e := observe.Event{Context: context.Background(), Op: observe.OpRelease, Keys: []string{"k"}, Err: errors.New("x"), Nodes: nodes("yes")}
	var zero Tracer
	zero.Observe(e)
	var nilTracer *Tracer
	nilTracer.Observe(e)
	tr, _, sr := newTracer(t, sdktrace.WithSampler(sdktrace.NeverSample()))
	tr.Observe(e)
	if n := len(sr.Ended()); n != 0 {
		t.Errorf("%d spans recorded, sampled out", n)
	}
	if NewTracer(nil).tracer == nil {
		t.Error("NewTracer(nil) has no tracer (want the global provider's)")
	}
}
