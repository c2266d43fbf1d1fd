package drift

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// scenario makes samples of a node whose clock runs at nodeRate and a
// client whose clock runs at clientRate against real time, one every
// `every` of real time. rtt(k) is sample k's real round trip, at(k) where
// in it (0..1) the node read its clock, step(k) the node clock's offset
// step (a jump) in effect at sample k.
type scenario struct {
	clientRate, nodeRate float64
	every                time.Duration
	n                    int
	rtt                  func(k int) time.Duration
	at                   func(k int) float64
	step                 func(k int) time.Duration
}

func (s scenario) samples() []Sample {
	out := make([]Sample, s.n)
	for k := range out {
		real := time.Duration(k) * s.every
		rtt, at, step := s.rtt(k), 0.5, time.Duration(0)
		if s.at != nil {
			at = s.at(k)
		}
		if s.step != nil {
			step = s.step(k)
		}
		read := real + time.Duration(at*float64(rtt))
		out[k] = Sample{
			Client: time.Duration(float64(real) * s.clientRate),
			RTT:    time.Duration(float64(rtt) * s.clientRate),
			Node:   epoch.Add(time.Duration(float64(read)*s.nodeRate) + step),
		}
	}
	return out
}

func constRTT(d time.Duration) func(int) time.Duration { return func(int) time.Duration { return d } }

// noisyRTT draws RTTs in [min, max] and reading points in [0, 1] from a
// fixed seed: deterministic.
func noisyRTT(min, max time.Duration, seed uint64) (func(int) time.Duration, func(int) float64) {
	r := rand.New(rand.NewPCG(seed, seed+1))
	n := 1000
	rtts, ats := make([]time.Duration, n), make([]float64, n)
	for i := range rtts {
		rtts[i] = min + time.Duration(r.Int64N(int64(max-min)+1))
		ats[i] = r.Float64()
	}
	return func(k int) time.Duration { return rtts[k%n] }, func(k int) float64 { return ats[k%n] }
}

func feed(e *Estimator, ss []Sample) {
	for _, s := range ss {
		e.Add(s)
	}
}

func TestEstimatorRates(t *testing.T) {
	noise, at := noisyRTT(50*time.Microsecond, 5*time.Millisecond, 7)
	spiky := func(k int) time.Duration {
		if k%5 == 3 {
			return 40 * time.Millisecond // a slow answer now and then
		}
		return 300 * time.Microsecond
	}
	cases := []struct {
		name string
		sc   scenario
		tol  float64
	}{
		{"slow client 0.8", scenario{clientRate: 0.8, nodeRate: 1, every: 20 * time.Millisecond, n: 40, rtt: constRTT(200 * time.Microsecond)}, 0.001},
		{"same rate", scenario{clientRate: 1, nodeRate: 1, every: 20 * time.Millisecond, n: 40, rtt: constRTT(200 * time.Microsecond)}, 0.001},
		{"fast client 1.02", scenario{clientRate: 1.02, nodeRate: 1, every: 20 * time.Millisecond, n: 40, rtt: constRTT(200 * time.Microsecond)}, 0.001},
		{"fast node 1.02", scenario{clientRate: 1, nodeRate: 1.02, every: time.Second, n: 40, rtt: constRTT(time.Millisecond)}, 0.001},
		{"rtt noise, same rate", scenario{clientRate: 1, nodeRate: 1, every: time.Second, n: 100, rtt: noise, at: at}, 0.001},
		{"rtt noise, slow client 0.995", scenario{clientRate: 0.995, nodeRate: 1, every: time.Second, n: 100, rtt: noise, at: at}, 0.001},
		{"rtt spikes, slow client 0.8", scenario{clientRate: 0.8, nodeRate: 1, every: 50 * time.Millisecond, n: 64, rtt: spiky, at: func(k int) float64 { return float64(k % 2) }}, 0.005},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := New(Config{Tolerance: tc.tol})
			feed(e, tc.sc.samples())
			want := 1 - tc.sc.clientRate/tc.sc.nodeRate
			r, ok := e.Rate()
			if !ok {
				t.Fatalf("rate not ok after %d samples: rate %v bound %v", tc.sc.n, r, e.Bound())
			}
			if got, b := e.Error(), e.Bound(); math.Abs(got-want) > b || b > tc.tol {
				t.Errorf("Error %.6f ± %.6f, want %.6f within the bound (tolerance %v)", got, b, want, tc.tol)
			}
			if wantR := tc.sc.nodeRate / tc.sc.clientRate; math.Abs(r-wantR) > 2*tc.tol {
				t.Errorf("Rate %.6f, want %.6f", r, wantR)
			}
			if e.Jumped() || e.Jumps() != 0 {
				t.Errorf("jump reported where there is none: %v", e.LastJump())
			}
		})
	}
}

// Rate is not ok until the error can be bounded below the tolerance.
func TestEstimatorNotOkYet(t *testing.T) {
	cases := []struct {
		name string
		sc   scenario
		cfg  Config
	}{
		{"no samples", scenario{clientRate: 1, nodeRate: 1, every: time.Second, n: 0, rtt: constRTT(time.Millisecond)}, Config{}},
		{"one sample", scenario{clientRate: 1, nodeRate: 1, every: time.Second, n: 1, rtt: constRTT(time.Millisecond)}, Config{}},
		{"below MinSamples", scenario{clientRate: 0.8, nodeRate: 1, every: time.Second, n: 3, rtt: constRTT(time.Millisecond)}, Config{MinSamples: 4}},
		{"baseline too short for the RTT", scenario{clientRate: 0.8, nodeRate: 1, every: 10 * time.Millisecond, n: 32, rtt: constRTT(5 * time.Millisecond)}, Config{Tolerance: 0.01}},
		{"RTT as long as the interval", scenario{clientRate: 1, nodeRate: 1, every: 10 * time.Millisecond, n: 8, rtt: constRTT(20 * time.Millisecond)}, Config{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := New(tc.cfg)
			feed(e, tc.sc.samples())
			if r, ok := e.Rate(); ok {
				t.Errorf("Rate %v ok with bound %v", r, e.Bound())
			}
		})
	}
}

func TestEstimatorJumps(t *testing.T) {
	noise, at := noisyRTT(100*time.Microsecond, 2*time.Millisecond, 3)
	cases := []struct {
		name  string
		step  time.Duration
		rate  float64
		jumps int
	}{
		{"forward 50ms", 50 * time.Millisecond, 1, 1},
		{"backward 30ms", -30 * time.Millisecond, 1, 1},
		{"forward 20ms, slow client", 20 * time.Millisecond, 0.8, 1},
		{"0.5ms: within the noise", 500 * time.Microsecond, 1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc := scenario{clientRate: tc.rate, nodeRate: 1, every: 100 * time.Millisecond, n: 40, rtt: noise, at: at,
				step: func(k int) time.Duration {
					if k >= 20 {
						return tc.step
					}
					return 0
				}}
			ss := sc.samples()
			e := New(Config{Tolerance: 0.005})
			feed(e, ss[:21])
			if e.Jumps() != tc.jumps || e.Jumped() != (tc.jumps > 0) {
				t.Fatalf("after the step: jumps %d jumped %v (last %v), want %d", e.Jumps(), e.Jumped(), e.LastJump(), tc.jumps)
			}
			if tc.jumps > 0 {
				if d := e.LastJump() - tc.step; d < -3*time.Millisecond || d > 3*time.Millisecond {
					t.Errorf("jump %v, want about %v", e.LastJump(), tc.step)
				}
				if _, ok := e.Rate(); ok {
					t.Error("rate ok right after a jump")
				}
			}
			feed(e, ss[21:])
			if _, ok := e.Rate(); !ok || e.Jumped() {
				t.Fatalf("rate not known again after 19 samples past the jump: jumped %v bound %v", e.Jumped(), e.Bound())
			}
			// An undetected step is a bias of step/baseline, not bounded by Bound.
			slack := e.Bound()
			if tc.jumps == 0 {
				slack += float64(tc.step) / float64(2*time.Second)
			}
			if want := 1 - tc.rate; math.Abs(e.Error()-want) > slack {
				t.Errorf("Error %v ± %v after the jump, want %v", e.Error(), e.Bound(), want)
			}
		})
	}
}

// Samples out of client-time order, or with a negative RTT, are ignored.
func TestEstimatorIgnoresBadSamples(t *testing.T) {
	e := New(Config{})
	s := Sample{Client: time.Second, Node: epoch, RTT: time.Millisecond}
	e.Add(s)
	e.Add(Sample{Client: time.Second, Node: epoch.Add(time.Hour), RTT: time.Millisecond})
	e.Add(Sample{Client: 2 * time.Second, Node: epoch.Add(time.Hour), RTT: -time.Millisecond})
	if e.Samples() != 1 || e.Jumps() != 0 {
		t.Fatalf("samples %d jumps %d, want 1 and 0", e.Samples(), e.Jumps())
	}
}
