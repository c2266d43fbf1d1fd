package chaos

import (
	"context"
	"flag"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/integration/harness"
)

var (
	fullFlag = flag.Bool("chaos.full", false, "run every scenario (also CHAOS_FULL=1)")
	outFlag  = flag.String("chaos.out", "", "file for the results table (relative to integration/chaos; default ../../docs/chaos.md in full mode, none in short mode)")
)

func TestMain(m *testing.M) {
	harness.QuietRedisLogs()
	if os.Getenv(HelperEnv) != "" {
		os.Exit(HelperMain())
	}
	// The reaper container cannot be pulled here; every container and
	// network is removed by the tests themselves.
	os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	goleak.VerifyTestMain(m, append(harness.IgnoreRedial(), harness.IgnoreRedisDial(),
		// testcontainers/docker client keep-alive connections in the idle pool.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)...)
}

func full() bool { return *fullFlag || os.Getenv("CHAOS_FULL") == "1" }

// seedFor returns CHAOS_SEED if set (replay), else a fresh seed.
func seedFor(i int) uint64 {
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err == nil {
			return v
		}
	}
	return uint64(time.Now().UnixNano()) + uint64(i)
}

const ms = time.Millisecond

// scenarios returns the suite; short mode keeps those marked short.
func scenarios() []struct {
	short bool
	s     Scenario
} {
	base := Scenario{Clients: 5, Procs: 1, Keys: 2, TTL: 500 * ms, Hold: 4 * ms, Duration: 6 * time.Second, Persist: true,
		GapMin: 100 * ms, GapMax: 400 * ms, DurMin: 100 * ms, DurMax: 700 * ms}
	with := func(f func(*Scenario)) Scenario { s := base; f(&s); return s }
	all := []Scenario{
		with(func(s *Scenario) { s.Name = "contention" }),
		with(func(s *Scenario) {
			s.Name = "nemesis-mixed"
			s.Faults = []string{FKill, FPause, FRestart, FLatency, FBlackhole, FDropReplies, FReset, FPartition, FIsolate}
		}),
		with(func(s *Scenario) {
			s.Name = "nemesis-mixed-fenced"
			s.Fencing = true
			s.Faults = []string{FKill, FPause, FRestart, FLatency, FPartition}
		}),
		with(func(s *Scenario) { s.Name = "slow-and-frozen-node"; s.Faults = []string{FLatency, FPause} }),
		with(func(s *Scenario) { s.Name = "ambiguous-replies"; s.Faults = []string{FDropReplies, FReset, FBlackhole} }),
		with(func(s *Scenario) { s.Name = "partition-asymmetric"; s.Faults = []string{FPartition, FIsolate} }),
		with(func(s *Scenario) {
			s.Name = "restart-fsync-always"
			s.Static, s.Faults, s.Targets, s.Hold = FPartition, []string{FRestart}, []int{2}, 300*ms
			s.GapMin, s.GapMax = 30*ms, 100*ms
		}),
		with(func(s *Scenario) {
			s.Name = "sanity-restart-no-persistence"
			s.Sanity, s.Persist = "overlap", false
			s.Static, s.Faults, s.Targets, s.Hold = FPartition, []string{FRestart}, []int{2}, 300*ms
			s.GapMin, s.GapMax = 30*ms, 100*ms
		}),
		// With QuarantineFresh: the helper process starts while node 2
		// restarts every 30-100 ms, so its first contact with node 2 is a
		// node up for less than the window, which the default mode counts
		// (a fresh deployment cannot be told from a node that restarted
		// empty; docs/restarts.md). In the default mode this
		// scenario found that double grant in 17 of 171 runs (about one
		// in five with coalescing, one in 25 without; each printed one
		// involved the helper process); with QuarantineFresh, none in 30.
		// Restarts come further apart than in the sanity twin: a node that
		// restarted empty does not vote for the window (the TTL) after its
		// start, so with restarts every 30-100 ms node 2, which both sides
		// need, never votes and nothing would be checked. 0.7-1.5 s apart it
		// votes between restarts, and a restart under a held lock is the
		// case the quarantine must cover.
		with(func(s *Scenario) {
			s.Name = "restart-no-persistence-quarantined"
			s.Persist, s.Quarantine = false, true
			s.Static, s.Faults, s.Targets, s.Hold = FPartition, []string{FRestart}, []int{2}, 300*ms
			s.GapMin, s.GapMax = 700*ms, 1500*ms
		}),
		with(func(s *Scenario) { s.Name = "pause-past-ttl-fenced"; s.Keys, s.Fencing, s.PauseEvery = 1, true, 1 }),
		with(func(s *Scenario) {
			s.Name = "sanity-pause-past-ttl-unfenced"
			s.Sanity, s.Keys, s.PauseEvery = "lost", 1, 1
		}),
		with(func(s *Scenario) { s.Name = "clock-skew-inside-budget"; s.Keys, s.Rate, s.HoldToEnd = 1, 0.995, true }),
		with(func(s *Scenario) {
			s.Name = "sanity-clock-skew-outside-budget"
			s.Sanity, s.Keys, s.Rate, s.HoldToEnd = "overlap", 1, 0.8, true
		}),
		with(func(s *Scenario) {
			s.Name = "clock-skew-outside-budget-monitored"
			s.Keys, s.Rate, s.HoldToEnd, s.DriftMonitor = 1, 0.8, true, true
		}),
	}
	// Short mode leaves the randomized restart sanity case to full mode:
	// on loaded cores it got too few acquisitions (6 in one run) to hit
	// the double grant; TestSanityRestartDeterministic covers it always.
	short := map[string]bool{"contention": true, "nemesis-mixed": true,
		"sanity-pause-past-ttl-unfenced": true, "sanity-clock-skew-outside-budget": true, "clock-skew-outside-budget-monitored": true}
	var out []struct {
		short bool
		s     Scenario
	}
	for _, s := range all {
		if !full() {
			s.Duration = 4 * time.Second
		}
		out = append(out, struct {
			short bool
			s     Scenario
		}{short[s.Name], s})
	}
	return out
}

var (
	resMu   sync.Mutex
	results []Result
)

func record(t *testing.T, r Result) {
	resMu.Lock()
	results = append(results, r)
	resMu.Unlock()
	t.Logf("%s: seed %d acquisitions %d overlaps %d lost %d rejected %d nonlinear %d unavail %v faults %d (%s) in %v",
		r.Scenario, r.Seed, r.Acquisitions, r.Overlaps, r.Lost, r.Rejected, r.NonLinear, r.Unavail, r.Faults, r.FaultKinds, r.Elapsed.Round(ms))
	for _, e := range r.Examples {
		t.Logf("  %s", e)
	}
	if v := r.Verdict(); strings.HasPrefix(v, "FAIL") {
		t.Errorf("%s (seed %d, replay with CHAOS_SEED=%d): %s", r.Scenario, r.Seed, r.Seed, v)
	}
}

// helperArgv re-executes this test binary as a client process.
func helperArgv() []string { return []string{os.Args[0], "-test.run=^$"} }

// procCluster starts nodes as redis-server processes, a counter node and
// two proxy groups.
func procCluster(t *testing.T, n int, persist bool) *Cluster {
	t.Helper()
	nodes := harness.Start(t, n, harness.Config{Persist: persist})
	ctr := harness.Start(t, 1, harness.Config{})
	c := &Cluster{Counter: ctr[0].Addr, Backend: "process"}
	for i, nd := range nodes {
		c.Nodes = append(c.Nodes, &procNode{n: nd, c: c, i: i})
	}
	if err := c.NewProxies(2); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseProxies)
	return c
}

func TestChaosProcesses(t *testing.T) {
	for i, sc := range scenarios() {
		if !full() && !sc.short {
			continue
		}
		t.Run(sc.s.Name, func(t *testing.T) {
			c := procCluster(t, 5, sc.s.Persist)
			seed := seedFor(i)
			t.Logf("seed %d (replay: CHAOS_SEED=%d)", seed, seed)
			r, err := Execute(context.Background(), sc.s, c, seed, helperArgv(), t.Logf)
			if err != nil {
				t.Error(err)
			}
			record(t, r)
		})
	}
}
