package redlock

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock/clock"
	"github.com/redlock-go/redlock/internal/drift"
	"github.com/redlock-go/redlock/observe"
)

func TestWithDriftValidation(t *testing.T) {
	for _, every := range []time.Duration{-time.Millisecond, -time.Second} {
		c, err := New(unreachable(3), WithDrift(Drift{Monitor: every, Exclude: true}))
		if err == nil {
			c.Close()
			t.Fatalf("WithDrift(Drift{Monitor: %v}) accepted", every)
		}
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "drift monitor interval") {
			t.Errorf("WithDrift(Drift{Monitor: %v}) = %v, want ErrInvalidArgument naming the interval", every, err)
		}
	}
	c, err := New(unreachable(3))
	if err != nil {
		t.Fatal(err)
	}
	if c.dm != nil || c.Stats().Drift.Nodes != nil {
		t.Error("drift monitor on by default")
	}
	c.Close()
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The monitor runs on the Client's clock: with a fake clock nothing is
// sent until it is advanced; each round's failed TIME calls are counted;
// Close stops it.
func TestDriftMonitorRunsOnClientClock(t *testing.T) {
	fake := clock.NewFake(time.Unix(1e9, 0))
	c, err := New(unreachable(3), WithClock(fake), WithDrift(Drift{Monitor: time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Stats().Drift; s.Failures != 0 || len(s.Nodes) != 3 {
		t.Fatalf("before the first interval: %+v", s)
	}
	// Each round fails on the 3 unreachable nodes. The monitor may set
	// its timer after an Advance: keep advancing until two rounds ran.
	for c.Stats().Drift.Failures < 6 {
		fake.Advance(time.Second)
		time.Sleep(time.Millisecond)
	}
	c.Close()
	select {
	case <-c.dm.done:
	default:
		t.Fatal("Close returned before the monitor ended")
	}
}

// feedRate feeds node i n samples of a node clock running 1/clientRate as
// fast as the client's, every 100ms of client time from start.
func feedRate(m *driftMon, i, n int, start time.Duration, clientRate float64) time.Duration {
	base := time.Unix(2e9, 0)
	for k := 0; k < n; k++ {
		cl := start + time.Duration(k)*100*time.Millisecond
		m.feed(i, drift.Sample{Client: cl, Node: base.Add(time.Duration(float64(cl) / clientRate)), RTT: 100 * time.Microsecond})
	}
	return start + time.Duration(n)*100*time.Millisecond
}

// With exclude, a node whose clock runs out of the budget is discounted
// with a *observe.DriftError, logged and counted once, and counts again (logged)
// once its rate is back within it.
func TestDriftGate(t *testing.T) {
	var logs syncBuffer
	lg := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := New(unreachable(3), WithClock(clock.NewFake(time.Unix(1e9, 0))), WithDrift(Drift{Factor: 0.01, Monitor: time.Hour, Exclude: true}),
		WithLogger(lg))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := c.dm
	end := feedRate(m, 1, 40, 0, 0.8)
	feedRate(m, 0, 40, 0, 0.995)
	if c.discount(0) != nil || c.discount(2) != nil {
		t.Fatalf("nodes within the budget discounted: %v, %v", c.discount(0), c.discount(2))
	}
	err = c.discount(1)
	var de *observe.DriftError
	if !errors.Is(err, observe.ErrClockDrift) || !errors.As(err, &de) || de.Addr != c.nodes[1].Addr() || de.Budget != 0.01 ||
		de.Drift < 0.19 || de.Drift > 0.21 {
		t.Fatalf("node 1 running 0.8: discount %v, want a *observe.DriftError of about 0.2", err)
	}
	if !c.countsFn(0) || c.countsFn(1) {
		t.Error("quorum counts do not follow the gate")
	}
	// Back to the same rate: the window turns over, and the node counts again.
	feedRate(m, 1, 40, end, 1)
	if err := c.discount(1); err != nil {
		t.Fatalf("node 1 back at rate 1: still discounted: %v", err)
	}
	s := c.Stats().Drift
	if s.Flagged != 1 || s.Samples != 120 || !s.Nodes[1].Known || s.Nodes[1].Out != nil {
		t.Errorf("stats %+v", s)
	}
	out := logs.String()
	if strings.Count(out, "outside the drift budget") != 1 || strings.Count(out, "back within the drift budget") != 1 {
		t.Errorf("want one Warn and one recovery line, got:\n%s", out)
	}
}

// Without exclude the monitor only reports: no gate.
func TestDriftMonitorReportOnly(t *testing.T) {
	c, err := New(unreachable(3), WithClock(clock.NewFake(time.Unix(1e9, 0))), WithDrift(Drift{Monitor: time.Hour}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	feedRate(c.dm, 1, 40, 0, 0.8)
	if c.discount(1) != nil || !c.countsFn(1) {
		t.Error("report-only monitor discounts votes")
	}
	if s := c.Stats().Drift; s.Flagged != 1 || !errors.Is(s.Nodes[1].Out, observe.ErrClockDrift) {
		t.Errorf("stats %+v", s)
	}
}
