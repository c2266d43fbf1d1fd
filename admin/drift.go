package admin

import (
	"fmt"
	"math"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/drift"
)

// ClockSample is one reading of a node's clock: a TIME reply and when, on
// the client's clock, it was asked for.
type ClockSample struct {
	// Client is the client's clock when TIME was sent, as a duration
	// since any fixed origin on a monotonic clock (time.Since(start)).
	Client time.Duration
	// Node is the node's clock as TIME answered it.
	Node time.Time
	// RTT is the round trip of TIME on the client's clock.
	RTT time.Duration
}

// DriftEstimate is EstimateDrift's result: how fast the node's clock runs
// next to the client's.
type DriftEstimate struct {
	// Known reports whether two samples far enough apart, beyond their
	// round trips, gave a rate; when false, Rate is 1, Error 0 and Bound
	// +Inf.
	Known bool
	// Rate is node seconds per client second (1.001: the node's clock
	// runs 0.1% fast).
	Rate float64
	// Error is 1 - 1/Rate: positive when the client's clock runs slow
	// against the node's, the unsafe side, to compare with a lock's drift
	// factor (redlock.Drift.Factor).
	Error float64
	// Bound is the half-width of the interval around Error that surely
	// holds the true error, given the samples' round trips.
	Bound float64
	// Samples is how many of the last samples the estimate is over: a
	// clock jump restarts the estimate at the sample that showed it.
	Samples int
	// Jumps is how many steps of the node clock's offset the samples
	// showed that neither the round trips nor the rate explain (over
	// 1ms: an NTP step, a date set by hand); LastJump is the last one's
	// size, positive when the node's clock stepped forward.
	Jumps    int
	LastJump time.Duration
}

// EstimateDrift estimates the node's clock rate against the client's from
// samples in the order they were taken, with the estimator
// the drift monitor (redlock.Drift.Monitor) runs: the rate between the lowest-RTT sample of
// the older half and of the newer half (the fastest round trips), with a
// bound from their RTTs; the node read its clock somewhere within each
// round trip. Fewer than two samples give an estimate that is not Known. Samples out of client-time order, or with a negative
// RTT, are refused with redlock.ErrInvalidArgument. It is a pure function.
func EstimateDrift(samples []ClockSample) (DriftEstimate, error) {
	for i, s := range samples {
		if s.RTT < 0 {
			return DriftEstimate{}, fmt.Errorf("%w: clock sample %d: negative RTT %v", redlock.ErrInvalidArgument, i, s.RTT)
		}
		if i > 0 && s.Client <= samples[i-1].Client {
			return DriftEstimate{}, fmt.Errorf("%w: clock sample %d: sent at %v, not after sample %d (%v)", redlock.ErrInvalidArgument, i, s.Client, i-1, samples[i-1].Client)
		}
	}
	e := drift.New(drift.Config{Window: len(samples)}) // every sample, as one window
	for _, s := range samples {
		e.Add(drift.Sample{Client: s.Client, Node: s.Node, RTT: s.RTT})
	}
	rate, _ := e.Rate()
	bound := e.Bound()
	return DriftEstimate{
		Known:    !math.IsInf(bound, 1),
		Rate:     rate,
		Error:    e.Error(),
		Bound:    bound,
		Samples:  e.Samples(),
		Jumps:    e.Jumps(),
		LastJump: e.LastJump(),
	}, nil
}
