package redlockotel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe"
	"github.com/redlock-go/redlock/redlockotel/metrictest"
)

// newTest returns Metrics recording into a manual reader.
func newTest(t *testing.T) (*Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	m, err := New(WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m, r
}

func nodes(votes ...string) []observe.NodeResult {
	var r []observe.NodeResult
	for i, v := range votes {
		n := observe.NodeResult{Addr: fmt.Sprintf("n%d:6379", i+1)}
		switch v {
		case "yes":
			n.Vote = true
		case "no":
		case "timeout":
			n.Err = context.DeadlineExceeded
		case "pending":
			n.Err = observe.ErrPending
		case "canceled":
			n.Err = context.Canceled
		default:
			n.Err = errors.New(v)
		}
		r = append(r, n)
	}
	return r
}

func qerr(op string, sentinel, cause error, need int, res []observe.NodeResult) *redlock.QuorumError {
	got := 0
	for _, n := range res {
		if n.Vote {
			got++
		}
	}
	return &redlock.QuorumError{Op: observe.Op(op), Keys: []string{"k"}, Need: need, Got: got, Attempts: 1, Nodes: res, Err: sentinel, Cause: cause}
}

func TestOutcome(t *testing.T) {
	cases := []struct {
		e    observe.Event
		want string
	}{
		{observe.Event{Op: "acquire"}, "acquired"},
		{observe.Event{Op: "extend"}, "extended"},
		{observe.Event{Op: "release"}, "released"},
		{observe.Event{Op: "acquire", Err: qerr("acquire", redlock.ErrNotObtained, nil, 3, nodes("yes", "no", "no", "no", "timeout"))}, "held"},
		{observe.Event{Op: "acquire", Err: qerr("acquire", redlock.ErrNotObtained, nil, 3, nodes("yes", "yes", "no", "timeout", "refused"))}, "unavailable"},
		// One node of five down beside a held key: the round was decided by
		// the no answers; the outage did not change it.
		{observe.Event{Op: "acquire", Err: qerr("acquire", redlock.ErrNotObtained, nil, 3, nodes("no", "no", "pending", "pending", "refused"))}, "held"},
		{observe.Event{Op: "acquire", Err: qerr("acquire", redlock.ErrNotObtained, nil, 3, nodes("no", "timeout", "timeout", "timeout", "pending"))}, "unavailable"},
		{observe.Event{Op: "acquire", Err: qerr("acquire", redlock.ErrNotObtained, nil, 3, nodes("yes", "yes", "yes", "pending", "pending"))}, "validity_expired"},
		{observe.Event{Op: "acquire", Err: qerr("acquire", redlock.ErrNotObtained, context.Canceled, 2, nil)}, "canceled"},
		{observe.Event{Op: "acquire", Err: qerr("acquire", redlock.ErrNotObtained, context.DeadlineExceeded, 2, nodes("no", "no", "no"))}, "deadline"},
		{observe.Event{Op: "acquire", Err: errors.New("boom")}, "error"},
		{observe.Event{Op: "acquire", Err: qerr("acquire", redlock.ErrNotObtained, fmt.Errorf("%w: node", redlock.ErrWrongType), 2, nodes("error", "error", "error"))}, "wrong_type"},
		{observe.Event{Op: "extend", Err: qerr("extend", redlock.ErrLockLost, nil, 2, nodes("no", "no", "yes"))}, "lost"},
		{observe.Event{Op: "extend", Err: qerr("extend", redlock.ErrNotExtended, nil, 2, nodes("yes", "timeout", "timeout"))}, "not_extended"},
		{observe.Event{Op: "extend", Err: qerr("extend", redlock.ErrNotExtended, context.Canceled, 2, nodes("yes", "canceled", "canceled"))}, "canceled"},
		{observe.Event{Op: "extend", Err: fmt.Errorf("%w: max hold", redlock.ErrNotExtended)}, "not_extended"},
		{observe.Event{Op: "extend", Err: fmt.Errorf("%w: released", redlock.ErrNotHeld)}, "not_held"},
		{observe.Event{Op: "release", Err: qerr("release", redlock.ErrNotHeld, nil, 2, nodes("no", "no", "yes"))}, "not_held"},
	}
	for _, tc := range cases {
		if got := Outcome(tc.e); got != tc.want {
			t.Errorf("Outcome(%s, %v) = %q, want %q", tc.e.Op, tc.e.Err, got, tc.want)
		}
		if !slices.Contains(outcomes, tc.want) { // New builds an attribute set for each listed one
			t.Errorf("outcome %q is not listed in outcomes", tc.want)
		}
	}
}

func TestRecordsEvents(t *testing.T) {
	m, r := newTest(t)
	lk := &redlock.Lock{} // a handle with no validity: tracked, then pruned
	m.Observe(observe.Event{Op: "acquire", Attempts: 1, Elapsed: 2 * time.Millisecond, Lock: lk, Remaining: time.Second,
		Nodes: nodes("yes", "yes", "yes", "pending", "timeout")})
	m.Observe(observe.Event{Op: "acquire", Attempts: 7, Elapsed: 300 * time.Millisecond,
		Err: qerr("acquire", redlock.ErrNotObtained, context.DeadlineExceeded, 3, nodes("no", "no", "no", "yes", "refused"))})
	m.Observe(observe.Event{Op: "acquire", Attempts: 1, Elapsed: time.Millisecond,
		Err: qerr("acquire", redlock.ErrNotObtained, nil, 3, nodes("no", "no", "no", "pending", "pending"))})
	m.Observe(observe.Event{Op: "extend", Attempts: 1, Lock: lk, Remaining: time.Second, Nodes: nodes("yes", "yes", "yes", "yes", "timeout")})
	lostErr := qerr("extend", redlock.ErrLockLost, nil, 3, nodes("no", "no", "no", "yes", "yes"))
	m.Observe(observe.Event{Op: "extend", Attempts: 1, Lock: lk, Err: lostErr})
	m.Observe(observe.Event{Op: "lost", Lock: lk, Err: lostErr}) // the Lock ends: counted once
	// A watchdog: a renewal, the stop at the max hold, the end at the deadline.
	m.Observe(observe.Event{Op: "renew", Attempts: 1, Lock: lk, Remaining: time.Second, Nodes: nodes("yes", "yes", "yes", "yes", "yes")})
	m.Observe(observe.Event{Op: "renew", Lock: lk, Err: fmt.Errorf("%w: renew by 30s would pass the max hold", redlock.ErrMaxHold)})
	m.Observe(observe.Event{Op: "lost", Lock: lk, Err: fmt.Errorf("%w: ran out at the max hold: %w", redlock.ErrLockLost, redlock.ErrMaxHold)})
	m.Observe(observe.Event{Op: "release", Attempts: 1, Lock: lk, Remaining: 0, Nodes: nodes("yes", "yes", "yes", "no", "no")})
	m.Observe(observe.Event{Op: "release", Attempts: 1, Lock: lk, Remaining: time.Second, Nodes: nodes("yes", "yes", "yes", "yes", "yes")})
	m.Observe(observe.Event{Op: "release", Attempts: 0, Lock: lk, Err: fmt.Errorf("%w: twice", redlock.ErrNotHeld)})
	// Node calls, on time and late.
	for _, e := range []observe.NodeEvent{
		{Op: "acquire", NodeResult: observe.NodeResult{Addr: "n1:6379", Vote: true, Latency: 300 * time.Microsecond}},
		{Op: "acquire", NodeResult: observe.NodeResult{Addr: "n5:6379", Err: context.DeadlineExceeded, Latency: 50 * time.Millisecond}, Late: true},
		{Op: "release", NodeResult: observe.NodeResult{Addr: "n5:6379", Err: context.DeadlineExceeded, Latency: 500 * time.Millisecond}, Late: true},
		{Op: "acquire", NodeResult: observe.NodeResult{Addr: "n4:6379", Err: errors.New("connection refused"), Latency: time.Millisecond}},
	} {
		m.ObserveNode(e)
	}

	got := metrictest.Collect(t, r)
	want := map[string]float64{
		"redlock.acquire.duration{redlock.outcome=acquired}":                                            1,
		"redlock.acquire.duration{redlock.outcome=acquired}:sum":                                        0.002,
		"redlock.acquire.duration{redlock.outcome=deadline}":                                            1,
		"redlock.acquire.duration{redlock.outcome=deadline}:sum":                                        0.3,
		"redlock.acquire.duration{redlock.outcome=held}":                                                1,
		"redlock.acquire.attempts{redlock.outcome=acquired}:sum":                                        1,
		"redlock.acquire.attempts{redlock.outcome=deadline}:sum":                                        7,
		"redlock.renewals{redlock.outcome=extended}":                                                    2,
		"redlock.renewals{redlock.outcome=max_hold}":                                                    1,
		"redlock.locks.lost{redlock.op=max_hold}":                                                       1,
		"redlock.renewals{redlock.outcome=lost}":                                                        1,
		"redlock.releases{redlock.outcome=released}":                                                    2,
		"redlock.releases{redlock.outcome=not_held}":                                                    1,
		"redlock.locks.lost{redlock.op=extend}":                                                         1,
		"redlock.locks.lost{redlock.op=release}":                                                        1,
		"redlock.locks.held{}":                                                                          0,
		"redlock.node.duration{redlock.op=acquire,server.address=n1,server.port=6379}":                  1,
		"redlock.node.duration{redlock.op=acquire,server.address=n1,server.port=6379}:sum":              0.0003,
		"redlock.node.duration{redlock.op=acquire,server.address=n5,server.port=6379}":                  1,
		"redlock.node.duration{redlock.op=release,server.address=n5,server.port=6379}:sum":              0.5,
		"redlock.node.errors{error.type=timeout,redlock.op=acquire,server.address=n5,server.port=6379}": 1,
		"redlock.node.errors{error.type=timeout,redlock.op=release,server.address=n5,server.port=6379}": 1,
		"redlock.node.errors{error.type=error,redlock.op=acquire,server.address=n4,server.port=6379}":   1,
	}
	for k, v := range want {
		g, ok := got[k]
		if !ok || g < v-1e-9 || g > v+1e-9 {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	// Node errors come from node events only: the pending and failed
	// nodes inside operation events are not counted twice.
	for k, v := range got {
		if strings.HasPrefix(k, "redlock.node.errors") {
			if _, ok := want[k]; !ok {
				t.Errorf("unexpected %s = %v", k, v)
			}
		}
	}
	if t.Failed() {
		t.Logf("collected:\n%s", metrictest.Dump(got))
	}
}

func TestCloseStopsGauge(t *testing.T) {
	m, r := newTest(t)
	if _, ok := metrictest.Collect(t, r)["redlock.locks.held{}"]; !ok {
		t.Fatal("held gauge not reported before Close")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	m.Observe(observe.Event{Op: "acquire", Lock: &redlock.Lock{}}) // ignored for the gauge, no panic
	if v, ok := metrictest.Collect(t, r)["redlock.locks.held{}"]; ok {
		t.Fatalf("held gauge still reported after Close: %v", v)
	}
}

func TestNilOption(t *testing.T) {
	if _, err := New(nil); err == nil || !strings.HasPrefix(err.Error(), "redlockotel:") {
		t.Fatalf("New(nil) = %v", err)
	}
}

// The held set stays bounded when nobody collects the gauge: expired
// handles are dropped as it grows.
func TestHeldSetBounded(t *testing.T) {
	m, _ := newTest(t)
	for i := 0; i < 10000; i++ {
		m.Observe(observe.Event{Op: "acquire", Attempts: 1, Lock: &redlock.Lock{}})
	}
	m.mu.Lock()
	n := len(m.held)
	m.mu.Unlock()
	if n > 64 {
		t.Fatalf("held set grew to %d expired handles", n)
	}
}
