package core

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/clock"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/observe"
)

// driftTTL is short so that each scenario takes under a second; nothing
// below asserts on speed.
const driftTTL = 500 * time.Millisecond

// skewed is a Client whose clock runs rate times as fast as real time (the
// nodes run on the real clock: same machine), with drift factor 0.01, and
// the real time at which its clock started (to convert its deadlines).
func skewed(t *testing.T, nodes []*harness.Node, rate float64, opts ...redlock.Option) (*redlock.Client, time.Time) {
	t.Helper()
	origin := time.Now()
	c := client(t, nodes, append([]redlock.Option{redlock.WithClock(clock.Scaled(clock.Real(), rate)),
		redlock.WithDrift(redlock.Drift{Factor: 0.01})}, opts...)...)
	return c, origin
}

// overlap has a (the skewed holder) take key for driftTTL and keep it
// until its validity ends, while b, with the real clock, retries for it
// from the start. It returns a's validity left (on a's clock) when b's
// Lock returned with the key, and by how much a's deadline, in real time,
// came after that return (positive: both held at once).
func overlap(t *testing.T, nodes []*harness.Node, a *redlock.Client, origin time.Time, rate float64, key string) (time.Duration, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	la, err := a.Lock(ctx, key, driftTTL)
	if err != nil {
		t.Fatal(err)
	}
	b := client(t, nodes, redlock.WithRetryBackoff(time.Millisecond, 2*time.Millisecond))
	lb, err := b.Lock(ctx, key, driftTTL)
	got := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	left := la.Remaining()
	aEnd := origin.Add(time.Duration(float64(la.Deadline().Sub(origin)) / rate)) // a's deadline in real time
	_ = lb.Release(ctx)
	_ = la.Release(ctx)
	return left, aEnd.Sub(got)
}

// TestDriftInsideBudgetNoOverlap: a client clock 0.5% slow, within the
// drift factor 0.01: the holder's validity ends before the nodes let
// another client in.
func TestDriftInsideBudgetNoOverlap(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	const rate = 0.995
	a, origin := skewed(t, nodes, rate)
	left, over := overlap(t, nodes, a, origin, rate, "drift:inside")
	t.Logf("rate %v: holder's validity left when the other got the key: %v (its deadline %v before)", rate, left, -over)
	if left > 0 {
		t.Fatalf("rate %v within the budget: holder still had %v when another client got the key", rate, left)
	}
}

// TestDriftOutsideBudgetOverlaps: a client clock 20% slow, far outside the
// drift factor 0.01, overestimates its validity: the nodes expire the key
// while the holder still believes it holds it, and another client takes
// it. This shows the check can fail. (The window is about 20% of the TTL;
// a machine stalled longer than that could hide it, so the scenario is
// tried up to three times.)
func TestDriftOutsideBudgetOverlaps(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	const rate = 0.8
	a, origin := skewed(t, nodes, rate)
	for try := 1; try <= 3; try++ {
		left, over := overlap(t, nodes, a, origin, rate, "drift:outside")
		t.Logf("try %d, rate %v: holder's validity left when the other got the key: %v (both held for %v)", try, rate, left, over)
		if left > 0 {
			return
		}
	}
	t.Fatal("rate 0.8: no overlap seen in 3 tries; the skewed holder always stopped in time")
}

// waitDrift polls c's drift monitor until done accepts its stats.
func waitDrift(t *testing.T, c *redlock.Client, done func(observe.DriftStats) bool) observe.DriftStats {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second) // a hang guard, not a speed check
	for {
		s := c.Stats().Drift
		if done(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("drift monitor did not settle in 30s: %s", driftSeen(s))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// driftSeen says what the drift monitor observed, the likeliest causes of
// a failure first: TIME calls that failed (timeouts on a loaded machine
// leave a node unknown), jumps, then each node's estimate.
func driftSeen(s observe.DriftStats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d of %d TIME calls failed, %d jumps, %d flags;", s.Failures, s.Samples+s.Failures, s.Jumps, s.Flagged)
	for _, n := range s.Nodes {
		fmt.Fprintf(&b, " %s known %v drift %.5f ± %.5f", n.Addr, n.Known, n.Drift, n.Bound)
		if n.Out != nil {
			fmt.Fprintf(&b, " out (%v)", n.Out)
		}
		b.WriteByte(';')
	}
	return b.String()
}

// TestDriftMonitorExcludesSkewedClient: the same 20%-slow client with the
// monitor on and exclude: once it has sampled enough, every node's yes is
// discounted with ErrClockDrift, so the client cannot take the lock, and
// the overlap of TestDriftOutsideBudgetOverlaps cannot happen.
func TestDriftMonitorExcludesSkewedClient(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	const rate = 0.8
	a, _ := skewed(t, nodes, rate, redlock.WithDrift(redlock.Drift{Monitor: 20 * time.Millisecond, Exclude: true}))
	s := waitDrift(t, a, func(s observe.DriftStats) bool {
		for _, n := range s.Nodes {
			if n.Out == nil {
				return false
			}
		}
		return true
	})
	for _, n := range s.Nodes {
		t.Logf("%s: drift %.4f ± %.4f (rate %.4f), out: %v", n.Addr, n.Drift, n.Bound, n.Rate, n.Out)
		var de *observe.DriftError
		if !errors.As(n.Out, &de) || !errors.Is(n.Out, observe.ErrClockDrift) {
			t.Fatalf("%s: %v, want a *DriftError", n.Addr, n.Out)
		}
		if want := 1 - rate; de.Jump == 0 && math.Abs(de.Drift-want) > n.Bound+0.001 {
			t.Errorf("%s: drift %v ± %v, want %v", n.Addr, de.Drift, n.Bound, want)
		}
	}
	_, err := a.TryLock(context.Background(), "drift:monitored", driftTTL)
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) || !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("skewed client got the lock: %v", err)
	}
	for _, r := range qe.Nodes {
		if r.Vote && !errors.Is(r.Discounted, observe.ErrClockDrift) {
			t.Errorf("%s: yes counted: %+v", r.Addr, r)
		}
	}
	if qe.Got != 0 {
		t.Errorf("%d yes counted, want 0: %v", qe.Got, qe)
	}
	// The key stays free for a client with a good clock: the discounted
	// attempt was undone on the nodes.
	b := client(t, nodes, redlock.WithRetryBackoff(time.Millisecond, 2*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lb, err := b.Lock(ctx, "drift:monitored", driftTTL)
	if err != nil {
		t.Fatal(err)
	}
	_ = lb.Release(ctx)
}

// TestDriftMonitorAcceptsTrueClock: a client on the real clock, monitor on
// with exclude: every node's rate gets known, none is out, locks work.
func TestDriftMonitorAcceptsTrueClock(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	c := client(t, nodes, redlock.WithDrift(redlock.Drift{Monitor: 20 * time.Millisecond, Exclude: true}))
	s := waitDrift(t, c, func(s observe.DriftStats) bool {
		for _, n := range s.Nodes {
			if !n.Known {
				return false
			}
		}
		return true
	})
	for _, n := range s.Nodes {
		t.Logf("%s: drift %.5f ± %.5f", n.Addr, n.Drift, n.Bound)
		switch {
		case n.Out != nil:
			t.Errorf("%s flagged on the true clock: %v; %s", n.Addr, n.Out, driftSeen(s))
		case math.Abs(n.Drift) > n.Bound+1e-4:
			t.Errorf("%s: drift %.5f outside its own bound ± %.5f on the true clock; %s", n.Addr, n.Drift, n.Bound, driftSeen(s))
		}
	}
	if s.Flagged != 0 || s.Jumps != 0 {
		t.Errorf("%d nodes flagged, %d jumps on the true clock; %s", s.Flagged, s.Jumps, driftSeen(s))
	}
	l, err := c.TryLock(context.Background(), "drift:true", driftTTL)
	if err != nil {
		t.Fatalf("TryLock with every node's clock accepted: %v (drift monitor: %s)", err, driftSeen(c.Stats().Drift))
	}
	_ = l.Release(context.Background())
}

// TestNodeTime: TIME through a client that honours ctx deadlines and
// through one that does not (guarded), against the local clock: the node
// runs on this machine.
func TestNodeTime(t *testing.T) {
	nodes := harness.Start(t, 1, harness.Config{})
	for _, honour := range []bool{true, false} {
		rc := redis.NewClient(&redis.Options{Addr: nodes[0].Addr, ContextTimeoutEnabled: honour})
		n := node.New(rc, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		before := time.Now()
		tm, err := n.Time(ctx)
		after := time.Now()
		cancel()
		rc.Close()
		if err != nil {
			t.Fatalf("ctx deadlines honoured %v: %v", honour, err)
		}
		// TIME has microsecond resolution: allow 1µs either side of the call.
		if tm.Before(before.Round(0).Add(-time.Microsecond)) || tm.After(after.Round(0).Add(time.Microsecond)) {
			t.Errorf("ctx deadlines honoured %v: node time %v outside [%v, %v]", honour, tm, before, after)
		}
	}
}
