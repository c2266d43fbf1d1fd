package redlockotel

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe"
)

// A successful acquisition decided before two healthy but slower nodes
// answered: no node event carries error.type or redlock.node.error (they
// are marked pending), the span's status is Unset, every event names its
// node by server.address and server.port, and times are in seconds.
func TestSpanPendingNodesAreNotErrors(t *testing.T) {
	tr, _, sr := newTracer(t)
	res := nodes("yes", "yes", "yes", "pending", "pending")
	res[0].Latency = 1500 * time.Microsecond
	tr.Observe(observe.Event{Context: context.Background(), Op: observe.OpAcquire, Keys: []string{"k"}, Attempts: 1,
		Elapsed: 2 * time.Millisecond, Remaining: 9500 * time.Millisecond, Nodes: res})
	s := sr.Ended()[0]
	if s.Status().Code != codes.Unset {
		t.Errorf("status %v, want Unset", s.Status())
	}
	if a := attrMap(s.Attributes()); a[KeyErrorType].Type() != attribute.INVALID || a[KeyRemaining].AsFloat64() != 9.5 {
		t.Errorf("span attributes %v: want no error.type, redlock.remaining 9.5 (s)", s.Attributes())
	}
	for i, ev := range s.Events() {
		na := attrMap(ev.Attributes)
		if _, has := na[KeyErrorType]; has {
			t.Errorf("node %d: error.type on a node that did not fail: %v", i, ev.Attributes)
		}
		if _, has := na[KeyNodeError]; has {
			t.Errorf("node %d: redlock.node.error on a node that did not fail: %v", i, ev.Attributes)
		}
		if _, has := na["redlock.node"]; has || na[KeyServerAddress].AsString() == "" || na[KeyServerPort].AsInt64() != 6379 {
			t.Errorf("node %d: want server.address and server.port, not redlock.node: %v", i, ev.Attributes)
		}
		if pending := na[KeyPending].AsBool(); pending != (i >= 3) {
			t.Errorf("node %d: redlock.node.pending = %v", i, pending)
		}
	}
	if l := attrMap(s.Events()[0].Attributes)[KeyLatency].AsFloat64(); l != 0.0015 {
		t.Errorf("node latency %v, want 0.0015 (s)", l)
	}
}

// Status Error and error.type go with failures only: TryLock on a key
// another client holds is an answer (Unset, outcome held); too few nodes
// answering, a ctx that ran out and a lost lock are failures, with
// error.type the outcome; a failed node's event carries error.type.
func TestSpanStatusOnlyForFailures(t *testing.T) {
	tr, _, sr := newTracer(t)
	held := qerr("acquire", redlock.ErrNotObtained, nil, 3, nodes("no", "no", "no", "yes", "yes"))
	down := qerr("acquire", redlock.ErrNotObtained, nil, 3, nodes("yes", "yes", "refused", "timeout", "timeout"))
	waited := qerr("acquire", redlock.ErrNotObtained, context.DeadlineExceeded, 3, nodes("no", "no", "no", "yes", "yes"))
	for _, err := range []error{held, down, waited} {
		tr.Observe(observe.Event{Context: context.Background(), Op: observe.OpAcquire, Keys: []string{"k"}, Attempts: 1, Err: err, Nodes: err.(*redlock.QuorumError).Nodes})
	}
	tr.Observe(observe.Event{Op: observe.OpLost, Keys: []string{"k"}, Err: redlock.ErrLockLost})
	spans := sr.Ended()
	for i, want := range []struct {
		code    codes.Code
		errType string
	}{{codes.Unset, ""}, {codes.Error, "unavailable"}, {codes.Error, "deadline"}, {codes.Error, "lost"}} {
		a := attrMap(spans[i].Attributes())
		if spans[i].Status().Code != want.code || a[KeyErrorType].AsString() != want.errType {
			t.Errorf("span %d (%s): status %v, error.type %q; want %v, %q", i, a[KeyOutcome].AsString(), spans[i].Status(), a[KeyErrorType].AsString(), want.code, want.errType)
		}
	}
	evs := spans[1].Events()
	if a := attrMap(evs[2].Attributes); a[KeyErrorType].AsString() != "error" || a[KeyNodeError].AsString() != "refused" {
		t.Errorf("refused node's event: %v", evs[2].Attributes)
	}
	if a := attrMap(evs[3].Attributes); a[KeyErrorType].AsString() != "timeout" {
		t.Errorf("timed-out node's event: %v", evs[3].Attributes)
	}
}

// The meter and the tracer carry the module's version as their scope's;
// held locks are an UpDownCounter (a non-monotonic sum), not a gauge;
// durations are histograms in seconds.
func TestScopeVersionAndInstrumentKinds(t *testing.T) {
	if scopeVersion() == "" {
		t.Fatal("scopeVersion is empty under go test")
	}
	tr, _, sr := newTracer(t)
	tr.Observe(observe.Event{Context: context.Background(), Op: observe.OpRelease, Keys: []string{"k"}, Nodes: nodes("yes")})
	if v := sr.Ended()[0].InstrumentationScope().Version; v != scopeVersion() {
		t.Errorf("tracer scope version %q, want %q", v, scopeVersion())
	}

	r := sdkmetric.NewManualReader()
	m, err := New(WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.Observe(observe.Event{Op: "acquire", Attempts: 1, Elapsed: time.Millisecond})
	m.ObserveNode(observe.NodeEvent{Op: "acquire", NodeResult: observe.NodeResult{Addr: "n1:6379", Vote: true}})
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if len(rm.ScopeMetrics) != 1 || rm.ScopeMetrics[0].Scope.Version != scopeVersion() {
		t.Fatalf("meter scopes %+v, want one with version %q", rm.ScopeMetrics, scopeVersion())
	}
	for _, md := range rm.ScopeMetrics[0].Metrics {
		switch md.Name {
		case "redlock.locks.held", "redlock.drift.out", "redlock.quarantine.nodes":
			if sum, ok := md.Data.(metricdata.Sum[int64]); !ok || sum.IsMonotonic {
				t.Errorf("%s is %T, want a non-monotonic sum (UpDownCounter)", md.Name, md.Data)
			}
		case "redlock.acquire.duration", "redlock.node.duration":
			if _, ok := md.Data.(metricdata.Histogram[float64]); !ok || md.Unit != "s" {
				t.Errorf("%s: %T in %q, want a histogram in s", md.Name, md.Data, md.Unit)
			}
		}
	}
}
