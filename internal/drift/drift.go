// Package drift estimates how fast a Redis node's clock runs next to the
// client's, and detects steps (jumps) in it, from samples of the node's
// TIME taken on the client's clock.
//
// # Model
//
// A lock's validity is ttl - elapsed - budget, measured on the client's
// clock; the node expires the key after ttl on its own clock. That is safe
// while
//
//	budget >= ttl * (1 - clientRate/nodeRate)
//
// where clientRate and nodeRate are how fast each clock runs against real
// time. Estimator.Rate estimates r = nodeRate/clientRate (node seconds per
// client second) and Estimator.Error returns 1 - 1/r = 1 - clientRate/nodeRate:
// positive when the client's clock runs slow against the node's (the
// client thinks less time passed, overestimates the validity: the
// dangerous side), negative when it runs fast (the client gives up early:
// safe). A lock configured with drift factor f is safe against this node
// while Error() <= f.
//
// # Method
//
// Each sample is a node TIME answer with the client's clock reading when
// the command was sent and its round-trip time (RTT), both on the client's
// clock. The node read its clock somewhere in [sent, sent+RTT]: the
// sample's midpoint is taken as the client time of the reading, with an
// error of at most RTT/2 (plus the node clock's resolution, 1µs for TIME).
//
// The rate is the ratio over the longest baseline in a window of recent
// samples: between the best (lowest-RTT) sample of the older half and the
// best of the newer half. Picking the lowest RTT drops the samples slowed
// by the network or a busy node. Because every sample's error is bounded,
// so is the rate's: Bound returns the half-width of the interval that
// surely holds the true Error, and Rate reports ok only once the window
// holds Config.MinSamples samples and Bound is at most Config.Tolerance.
//
// A jump is a step in the node clock's offset that neither the RTTs nor
// the rate can explain: a new sample further than Config.MinJump plus
// twice that uncertainty from where the estimate puts it (for example an
// NTP step, or someone setting the date). After a jump the window restarts
// at the new sample; Jumped reports true until the rate is known again.
//
// An Estimator is pure logic (no clock, no I/O, deterministic) and is not
// safe for concurrent use.
package drift

import (
	"math"
	"time"
)

// Sample is one reading of a node's clock.
type Sample struct {
	// Client is the client's clock when TIME was sent, as a duration
	// since a fixed origin on the client's (monotonic) clock.
	Client time.Duration
	// Node is the node's clock as TIME answered it.
	Node time.Time
	// RTT is the round trip of TIME on the client's clock.
	RTT time.Duration
}

// mid is the sample's midpoint on the client's clock.
func (s Sample) mid() time.Duration { return s.Client + s.RTT/2 }

// Config tunes an Estimator. Zero fields take the defaults.
type Config struct {
	// Window is how many recent samples are kept (default 32, at least 4).
	Window int
	// MinSamples is how many samples Rate needs before ok (default 4, at
	// least 2).
	MinSamples int
	// Tolerance is the largest Bound at which Rate reports ok (default
	// 0.001). Set it well below the error that matters (the drift factor).
	Tolerance float64
	// MinJump is the smallest offset step reported as a jump (default
	// 1ms).
	MinJump time.Duration
	// Resolution is the node clock's resolution (default 1µs, TIME's).
	Resolution time.Duration
}

func (c Config) withDefaults() Config {
	if c.Window < 4 {
		c.Window = 32
	}
	if c.MinSamples < 2 {
		c.MinSamples = 4
	}
	if c.MinSamples > c.Window {
		c.MinSamples = c.Window
	}
	if c.Tolerance <= 0 || math.IsNaN(c.Tolerance) {
		c.Tolerance = 0.001
	}
	if c.MinJump <= 0 {
		c.MinJump = time.Millisecond
	}
	if c.Resolution <= 0 {
		c.Resolution = time.Microsecond
	}
	return c
}

// Estimator estimates one node's clock rate against the client's from
// samples. The zero value is not usable; call New.
type Estimator struct {
	cfg      Config
	win      []Sample // oldest first, at most cfg.Window
	fit      fit      // over win; valid when fit.ok
	jumped   bool     // a jump was seen and the rate is not known again yet
	lastJump time.Duration
	jumps    int
}

// fit is the rate between two anchor samples, with its bounds.
type fit struct {
	ok       bool    // two anchors with a positive baseline beyond their error
	a, b     Sample  // older and newer anchor
	r        float64 // node seconds per client second, from the midpoints
	rLo, rHi float64 // bounds of the true r
}

// New returns an Estimator with cfg (zero fields take the defaults).
func New(cfg Config) *Estimator { return &Estimator{cfg: cfg.withDefaults()} }

// Add feeds one sample. Samples must come in client-time order; one that
// does not (or has a negative RTT) is ignored. A sample that shows a jump
// restarts the window with itself.
func (e *Estimator) Add(s Sample) {
	if s.RTT < 0 || (len(e.win) > 0 && s.Client <= e.win[len(e.win)-1].Client) {
		return
	}
	if step, ok := e.jump(s); ok {
		e.jumped, e.lastJump, e.jumps = true, step, e.jumps+1
		e.win = append(e.win[:0], s)
		e.fit = fit{}
		return
	}
	if len(e.win) == e.cfg.Window {
		copy(e.win, e.win[1:])
		e.win = e.win[:len(e.win)-1]
	}
	e.win = append(e.win, s)
	e.fit = e.refit()
	if _, ok := e.Rate(); ok {
		e.jumped = false
	}
}

// jump reports whether s is a step away from the current estimate, and
// its size (node time minus where the estimate puts it).
func (e *Estimator) jump(s Sample) (time.Duration, bool) {
	var anchor Sample
	r, slack := 1.0, math.Inf(1)
	switch {
	case e.fit.ok:
		anchor, r = e.fit.b, e.fit.r
		slack = math.Max(e.fit.rHi-r, r-e.fit.rLo)
	case len(e.win) > 0:
		anchor = e.win[len(e.win)-1]
	}
	if math.IsInf(slack, 1) { // no rate yet: a step cannot be told from a rate
		return 0, false
	}
	gap := float64(s.mid() - anchor.mid())
	want := anchor.Node.Add(time.Duration(r * gap))
	step := s.Node.Sub(want)
	unc := float64(anchor.RTT/2+s.RTT/2+2*e.cfg.Resolution) + slack*math.Abs(gap)
	return step, math.Abs(float64(step)) > float64(e.cfg.MinJump)+2*unc
}

// refit picks the anchors over the window: the lowest-RTT sample of the
// older half and of the newer half.
func (e *Estimator) refit() fit {
	n := len(e.win)
	if n < 2 {
		return fit{}
	}
	a, b := best(e.win[:n/2]), best(e.win[n/2:])
	base := float64(b.mid() - a.mid())
	u := float64(a.RTT/2 + b.RTT/2)
	dn := float64(b.Node.Sub(a.Node))
	res := float64(e.cfg.Resolution)
	if base <= u || dn <= res {
		return fit{}
	}
	return fit{ok: true, a: a, b: b, r: dn / base, rLo: (dn - res) / (base + u), rHi: (dn + res) / (base - u)}
}

// best returns the sample with the lowest RTT (the latest of equals).
func best(w []Sample) Sample {
	b := w[0]
	for _, s := range w[1:] {
		if s.RTT <= b.RTT {
			b = s
		}
	}
	return b
}

// Rate returns the estimated node rate per client rate (1 = same speed;
// 1.25 = the node's clock runs 25% faster than the client's). ok is false
// until the window holds Config.MinSamples samples and Bound is at most
// Config.Tolerance; rate is then 1 if nothing is known yet.
func (e *Estimator) Rate() (rate float64, ok bool) {
	if !e.fit.ok {
		return 1, false
	}
	return e.fit.r, len(e.win) >= e.cfg.MinSamples && e.Bound() <= e.cfg.Tolerance
}

// Error returns the estimated 1 - clientRate/nodeRate = 1 - 1/Rate:
// positive when the client's clock runs slow against the node's (the
// unsafe side, to compare with the drift factor), 0 when no rate is
// estimated yet. See Rate's ok for whether it can be trusted.
func (e *Estimator) Error() float64 {
	if !e.fit.ok {
		return 0
	}
	return 1 - 1/e.fit.r
}

// Bound returns the half-width of the interval around Error that surely
// holds the true error, given the samples' RTTs; +Inf while no rate is
// estimated.
func (e *Estimator) Bound() float64 {
	if !e.fit.ok {
		return math.Inf(1)
	}
	err := 1 - 1/e.fit.r
	return math.Max(err-(1-1/e.fit.rLo), (1-1/e.fit.rHi)-err)
}

// Jumped reports whether a jump was detected and the rate has not been
// estimated (ok) again since.
func (e *Estimator) Jumped() bool { return e.jumped }

// LastJump returns the size of the last jump detected (positive: the
// node's clock stepped forward), 0 if none.
func (e *Estimator) LastJump() time.Duration { return e.lastJump }

// Jumps returns how many jumps were detected.
func (e *Estimator) Jumps() int { return e.jumps }

// Samples returns how many samples the window holds.
func (e *Estimator) Samples() int { return len(e.win) }
