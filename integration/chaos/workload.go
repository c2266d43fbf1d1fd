// Package chaos runs lock workloads against real Redis nodes while a seeded
// nemesis injects faults, and checks the recorded history for mutual
// exclusion, lost updates and linearizability, and for the typed locks'
// guarantees: no writer beside another holder, at most n permit holders,
// one reentrant hold at a time (types.go, typecheck.go).
package chaos

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sys/unix"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/clock"
	"github.com/redlock-go/redlock/fence"
	"github.com/redlock-go/redlock/observe"
)

// Mono reads CLOCK_MONOTONIC in nanoseconds: the clock all processes on
// this machine share, so intervals recorded by the helper process and by
// the test process are comparable.
func Mono() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}

// Record is one successful acquisition, times in Mono nanoseconds.
type Record struct {
	Client  int    `json:"c"`
	Key     string `json:"k"`
	Call    int64  `json:"call"`    // Lock called
	Acq     int64  `json:"acq"`     // Lock returned the lock
	RelCall int64  `json:"relcall"` // Release called
	RelRet  int64  `json:"relret"`  // Release returned
	Valid   int64  `json:"valid"`   // end of validity as the client believes it, in real time
	Wrote   bool   `json:"wrote"`   // the increment was accepted by the resource
	Fenced  bool   `json:"fenced"`  // the fenced resource rejected the write
	// Watchdog locks: Valid is the deadline as of the lock's end (moved by
	// each renewal), Renews the successful renewals, Lost that the lock
	// ended (Done) before the holder was done with it.
	Renews int  `json:"renews,omitempty"`
	Lost   bool `json:"lost,omitempty"`
	// Typed locks (types.go): the lock's observe.Kind, and for a reentrant
	// entry the hold it belongs to (the owner value of the hold's first
	// entry). Key is the semaphore's key for a permit, not the permit's.
	Kind string `json:"kind,omitempty"`
	Hold string `json:"hold,omitempty"`
}

// End is the end of the holder's interval: min(release called, validity).
func (r Record) End() int64 { return min(r.RelCall, r.Valid) }

// Spec is one client's workload. It is JSON so the helper process gets
// the same one.
type Spec struct {
	Client     int           `json:"client"`
	Nodes      []string      `json:"nodes"`   // redis:// URLs (through proxies)
	Counter    string        `json:"counter"` // the separate Redis with counters and tokens
	Keys       []string      `json:"keys"`
	TTL        time.Duration `json:"ttl"`
	Hold       time.Duration `json:"hold"`     // max random critical section
	Duration   time.Duration `json:"duration"` // how long to run
	Fencing    bool          `json:"fencing"`
	Seed       uint64        `json:"seed"`
	ClockRate  float64       `json:"rate"`        // client clock rate (1: real)
	HoldToEnd  bool          `json:"hold_to_end"` // hold until the believed deadline
	PauseEvery int           `json:"pause_every"` // every n-th hold pauses past the TTL (0: never)
	// Watchdog mode (Lease > 0): locks taken with redlock.Watchdog, a
	// lease of Lease renewed every Every, held for HoldMin..Hold; UseRun
	// holds them through Client.Run instead of Lock and Release.
	Lease   time.Duration `json:"lease,omitempty"`
	Every   time.Duration `json:"every,omitempty"`
	HoldMin time.Duration `json:"hold_min,omitempty"`
	UseRun  bool          `json:"run,omitempty"`
	Persist bool          `json:"-"`
	// Quarantine keeps the library's restart quarantine on (its default);
	// off otherwise, so that the scenarios measure what they measured
	// before it existed and the sanity ones still show their violation.
	Quarantine bool `json:"quarantine,omitempty"`
	// DriftMonitor runs the client with WithDrift(Drift{Monitor: 20ms, Exclude: true}) and
	// takes no lock before the monitor has an estimate for every node.
	DriftMonitor bool `json:"drift_monitor,omitempty"`
	// Typed runs the typed workload (types.go) on Keys instead of plain
	// locks: readers, writers, permits of semaphores of Permits and
	// reentrant holds.
	Typed   bool `json:"typed,omitempty"`
	Permits int  `json:"permits,omitempty"`
	// Observe, if set, sees every operation of the client (the helper
	// process counts which of its calls reached a node).
	Observe func(observe.Event) `json:"-"`
}

// CounterKey names the workload's counter in the counter Redis. With
// fencing, it is written through package fence with the lock's own token
// (redlock.WithFencing), which keeps the highest token seen under
// fence.TokenKey(CounterKey(k)).
func CounterKey(k string) string { return "ctr:" + k }

// Run runs the workload until its duration is over or ctx is done and
// returns the records of every acquisition.
func Run(ctx context.Context, s Spec) ([]Record, error) {
	rng := mrand.New(mrand.NewPCG(s.Seed, uint64(s.Client)))
	rate := s.ClockRate
	if rate == 0 {
		rate = 1
	}
	clk := clock.Real()
	if rate != 1 {
		clk = clock.Scaled(clock.Real(), rate)
	}
	opts := []redlock.Option{redlock.WithClock(clk), redlock.WithRetryBackoff(2*time.Millisecond, 16*time.Millisecond),
		redlock.WithNodeTimeout(50 * time.Millisecond)}
	if !s.Quarantine {
		opts = append(opts, redlock.WithRestartQuarantine(redlock.QuarantineOff))
	} else {
		opts = append(opts, redlock.WithRestartQuarantine(s.TTL, redlock.QuarantineFresh))
	}
	if s.Observe != nil {
		opts = append(opts, redlock.WithObserver(s.Observe))
	}
	if s.Fencing {
		opts = append(opts, redlock.WithFencing())
	}
	if s.DriftMonitor {
		opts = append(opts, redlock.WithDrift(redlock.Drift{Monitor: 20 * time.Millisecond, Exclude: true}))
	}
	var w *watch
	if s.Lease > 0 {
		w = newWatch()
		opts = append(opts, redlock.WithWatchdog(s.Lease, s.Every), redlock.WithObserver(w.observe))
	}
	lc, err := redlock.NewFromURLs(s.Nodes, opts...)
	if err != nil {
		return nil, err
	}
	defer lc.Close()
	if s.DriftMonitor {
		if err := driftKnown(ctx, lc); err != nil {
			return nil, err
		}
	}
	ctr := redis.NewClient(&redis.Options{Addr: s.Counter, ContextTimeoutEnabled: true})
	defer ctr.Close()
	ctx, cancel := context.WithTimeout(ctx, s.Duration)
	defer cancel()
	if s.Typed {
		return runTyped(ctx, s, lc, rng)
	}
	var recs []Record
	n := 0
	for ctx.Err() == nil {
		key := s.Keys[rng.IntN(len(s.Keys))]
		if w != nil {
			r, ok, err := holdWatchdog(ctx, s, lc, ctr, key, rng, clk, rate, w)
			if err != nil {
				return recs, err
			}
			if ok {
				recs = append(recs, r)
			}
			continue
		}
		r := Record{Client: s.Client, Key: key, Call: Mono()}
		actx, acancel := context.WithTimeout(ctx, 2*s.TTL)
		l, err := lc.Lock(actx, key, s.TTL)
		acancel()
		if err != nil {
			if errors.Is(err, redlock.ErrInvalidArgument) || errors.Is(err, redlock.ErrClosed) {
				return recs, err
			}
			continue
		}
		r.Acq = Mono()
		r.Valid = r.Acq + int64(float64(l.Remaining())/rate)
		n++
		r.Wrote, r.Fenced = critical(ctx, s, ctr, key, l, rng, clk, n)
		r.RelCall = Mono()
		_ = l.Release(context.Background())
		r.RelRet = Mono()
		recs = append(recs, r)
	}
	return recs, nil
}

// critical is the lock-protected read-modify-write: read the counter,
// work, write counter+1 (through the fenced resource when fencing is on).
func critical(ctx context.Context, s Spec, ctr *redis.Client, key string, l *redlock.Lock, rng *mrand.Rand, clk clock.Clock, n int) (wrote, fenced bool) {
	bg := context.WithoutCancel(ctx)
	v, err := ctr.Get(bg, CounterKey(key)).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, false
	}
	switch {
	case s.PauseEvery > 0 && n%s.PauseEvery == 0:
		time.Sleep(s.TTL * 3 / 2) // a GC pause / SIGSTOP past the TTL
	case s.HoldToEnd:
		_ = clk.Sleep(bg, l.Remaining()) // use all the validity the client believes it has
	case s.Hold > 0:
		time.Sleep(time.Duration(rng.Int64N(int64(s.Hold))))
	}
	next := strconv.FormatInt(v+1, 10)
	if s.Fencing {
		switch err := fence.Set(bg, ctr, CounterKey(key), l.Token(), l.Owner(), next); {
		case errors.Is(err, fence.ErrStale):
			return false, true
		case err != nil:
			return false, false
		}
		return true, false
	}
	if err := ctr.Set(bg, CounterKey(key), next, 0).Err(); err != nil {
		return false, false
	}
	return true, false
}

// String describes a spec briefly.
func (s Spec) String() string {
	return fmt.Sprintf("client %d ttl %v rate %v fencing %v", s.Client, s.TTL, s.ClockRate, s.Fencing)
}

// driftKnown waits until the Client's drift monitor has an estimate for
// every node (within bounds or not): a deployment that relies on the
// monitor takes no lock before it.
func driftKnown(ctx context.Context, lc *redlock.Client) error {
	for {
		known := 0
		st := lc.Stats().Drift
		for _, n := range st.Nodes {
			if n.Known || n.Out != nil {
				known++
			}
		}
		if known == len(st.Nodes) && known > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("drift monitor: no estimate for every node: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
