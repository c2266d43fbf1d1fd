package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/observe"
)

// Scenario is one workload run under one fault model.
type Scenario struct {
	Name    string
	Sanity  string // non-empty: the checker that MUST report a violation ("overlap", "lost", "linear")
	Persist bool   // nodes with appendonly + appendfsync always
	// Quarantine runs the clients with the restart quarantine on, in
	// QuarantineFresh mode (clients join while nodes restart).
	Quarantine bool
	// DriftMonitor runs the skewed client (client 0) with the drift
	// monitor excluding out-of-budget nodes.
	DriftMonitor bool
	Clients      int // goroutine clients (split over two client groups)
	Procs        int // helper-process clients
	Keys         int
	TTL          time.Duration
	Hold         time.Duration
	Duration     time.Duration
	Fencing      bool
	Faults       []string
	Targets      []int // nodes the nemesis may hit (nil: all)
	GapMin       time.Duration
	GapMax       time.Duration
	DurMin       time.Duration
	DurMax       time.Duration
	Static       string // "partition": the asymmetric partition holds for the whole run
	// Client 0's deviations (the sanity cases).
	Rate       float64
	HoldToEnd  bool
	PauseEvery int
	Container  bool // nodes as containers (else processes)
	// Watchdog mode (Lease > 0): every client takes its locks with
	// redlock.Watchdog, a lease of Lease renewed every Every, and holds
	// each for HoldMin..Hold (longer than the lease); TTL should be the
	// lease (it bounds the nemesis schedule and each Lock call). See
	// watchdog.go.
	Lease, Every, HoldMin time.Duration
	WantLosses            bool // the run must see locks lost while held (Done before the holder was done)
	Permits               int  // typed scenarios (ExecuteTyped): the semaphores' number of permits
}

// Result is one row of the results table.
type Result struct {
	Scenario, Backend        string
	Seed                     uint64
	Clients, Acquisitions    int
	Overlaps, Lost, Rejected int
	NonLinear, Unknown       int
	Unavail                  time.Duration
	Faults                   int
	FaultKinds               string
	Elapsed                  time.Duration
	Expect                   string
	Examples                 []string
	// Watchdog scenarios (Lease > 0): successful renewals, holds whose
	// interval outlived the lease, locks lost while held (Done fired
	// before the holder was done) and increments written.
	Lease, Every                       time.Duration
	Renewals, PastLease, Losses, Wrote int
	WantLosses                         bool
}

// Violations reports the checker's count by name.
func (r Result) Violations(checker string) int {
	switch checker {
	case "overlap":
		return r.Overlaps
	case "lost":
		return r.Lost
	case "linear":
		return r.NonLinear
	}
	return r.Overlaps + r.Lost + r.NonLinear
}

// Verdict says whether the row is as promised.
func (r Result) Verdict() string {
	if r.Acquisitions == 0 {
		return "FAIL: no acquisitions (nothing checked)"
	}
	if r.Lease > 0 && (r.Renewals == 0 || r.PastLease == 0) {
		return fmt.Sprintf("FAIL: watchdog not exercised (%d renewals, %d holds past the lease)", r.Renewals, r.PastLease)
	}
	if r.WantLosses && r.Losses == 0 {
		return "FAIL: no lock was lost while held (the loss path not exercised)"
	}
	if r.Expect != "" {
		if r.Violations(r.Expect) > 0 {
			return "violation found (as required)"
		}
		return "FAIL: no violation"
	}
	if r.Violations("") == 0 {
		return "ok"
	}
	return "FAIL: violations"
}

// Execute runs s on cluster c (already started, with two proxy groups).
// helper is the command line of the helper process (nil: no processes).
func Execute(ctx context.Context, s Scenario, c *Cluster, seed uint64, helper []string, logf func(string, ...any)) (Result, error) {
	res := Result{Scenario: s.Name, Backend: c.Backend, Seed: seed, Clients: s.Clients + s.Procs, Expect: s.Sanity, Lease: s.Lease,
		Every: s.Every, WantLosses: s.WantLosses}
	began := time.Now()
	keys := make([]string, s.Keys)
	for i := range keys {
		keys[i] = fmt.Sprintf("chaos:%s:%d:k%d", s.Name, seed, i)
	}
	ctr := redis.NewClient(&redis.Options{Addr: c.Counter})
	defer ctr.Close()
	spec := func(i int) Spec {
		sp := Spec{Client: i, Nodes: c.URLs(i % 2), Counter: c.Counter, Keys: keys, TTL: s.TTL, Hold: s.Hold,
			Duration: s.Duration, Fencing: s.Fencing, Seed: seed, Quarantine: s.Quarantine}
		if i == 0 {
			sp.ClockRate, sp.HoldToEnd, sp.PauseEvery, sp.DriftMonitor = s.Rate, s.HoldToEnd, s.PauseEvery, s.DriftMonitor
		}
		if s.Lease > 0 {
			sp.Lease, sp.Every, sp.HoldMin, sp.UseRun = s.Lease, s.Every, s.HoldMin, i%2 == 1
		}
		return sp
	}
	from := Mono()
	recs, n, kinds, errs := drive(ctx, s, c, seed, helper, logf, spec)
	to := Mono()
	res.Faults, res.FaultKinds = n, summarize(kinds)
	if s.Static != "" {
		res.FaultKinds = strings.TrimPrefix(res.FaultKinds+" static-"+s.Static, "- ")
	}
	res.Acquisitions = len(recs)
	if s.Lease > 0 {
		res.Renewals, res.PastLease, res.Losses, res.Wrote = watchdogStats(recs, s.Lease)
	}
	res.Overlaps, res.Examples = Overlaps(recs)
	// Checker 2: every accepted increment must be in the final counter.
	for _, k := range keys {
		acked := 0
		for _, r := range recs {
			if r.Key == k && r.Wrote {
				acked++
			}
			if r.Key == k && r.Fenced {
				res.Rejected++
			}
		}
		v, _ := ctr.Get(context.Background(), CounterKey(k)).Int()
		if acked > v {
			res.Lost += acked - v
		}
	}
	res.NonLinear, res.Unknown = Linearizable(recs, 20*time.Second)
	res.Unavail = Unavailability(recs, keys, from, to)
	res.Elapsed = time.Since(began)
	if len(errs) > 0 {
		return res, fmt.Errorf("%s: %v", s.Name, errs)
	}
	return res, nil
}

// drive runs spec(i) for every client of s (goroutines, then helper
// processes) beside the nemesis's schedule for s and returns their records,
// the faults injected by kind, and the errors of clients and nemesis.
func drive(ctx context.Context, s Scenario, c *Cluster, seed uint64, helper []string, logf func(string, ...any),
	spec func(int) Spec) (recs []Record, faults int, kinds map[string]int, errs []error) {
	targets := s.Targets
	if targets == nil {
		for i := range c.Nodes {
			targets = append(targets, i)
		}
	}
	sched := Schedule(seed, s.Faults, targets, len(c.Proxies), s.Duration-s.TTL, s.GapMin, s.GapMax, s.DurMin, s.DurMax)
	if s.Static == FPartition {
		heal := Partition(c)
		defer heal()
	}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	add := func(r []Record, err error) {
		mu.Lock()
		defer mu.Unlock()
		recs = append(recs, r...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	for i := 0; i < s.Clients; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); add(Run(ctx, spec(i))) }()
	}
	for j := 0; j < s.Procs && helper != nil; j++ {
		wg.Add(1)
		go func() { defer wg.Done(); add(runHelper(ctx, helper, spec(s.Clients+j))) }()
	}
	nctx, ncancel := context.WithTimeout(ctx, s.Duration)
	n, kinds, nerr := Nemesis(nctx, c, sched, logf)
	ncancel()
	wg.Wait()
	if nerr != nil {
		errs = append(errs, nerr)
	}
	return recs, n, kinds, errs
}

// HelperEnv carries the spec to the helper process.
const HelperEnv = "CHAOS_HELPER_SPEC"

// runHelper runs one client in a separate OS process and reads its records.
func runHelper(ctx context.Context, argv []string, sp Spec) ([]Record, error) {
	b, err := json.Marshal(sp)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), HelperEnv+"="+string(b))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var recs []Record
	var sum *helperSummary
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var line struct {
			Record
			helperSummary
		}
		switch err := json.Unmarshal(sc.Bytes(), &line); {
		case err != nil:
		case line.Done:
			sum = &line.helperSummary
		case line.Acq != 0:
			recs = append(recs, line.Record)
		}
	}
	if err := cmd.Wait(); err != nil {
		return recs, fmt.Errorf("helper process: %w", err)
	}
	// The helper must have taken part: where acquisitions are rare (a node
	// restarted every second) it may win none, but its calls must have
	// reached the nodes.
	if sum == nil || len(recs) == 0 && sum.Answered == 0 {
		return nil, fmt.Errorf("helper process recorded nothing (summary %+v)", sum)
	}
	return recs, nil
}

// helperSummary is the helper process's last line: how many of its
// operations had an answer from at least one node.
type helperSummary struct {
	Done     bool  `json:"done"`
	Answered int64 `json:"answered"`
}

// HelperMain is the helper process's main: run the spec from the
// environment and print one JSON record per line. It returns the exit code.
func HelperMain() int {
	var sp Spec
	if err := json.Unmarshal([]byte(os.Getenv(HelperEnv)), &sp); err != nil {
		fmt.Fprintln(os.Stderr, "chaos helper:", err)
		return 2
	}
	var answered atomic.Int64
	sp.Observe = func(e observe.Event) {
		for _, n := range e.Nodes {
			if n.Err == nil {
				answered.Add(1)
				return
			}
		}
	}
	recs, err := Run(context.Background(), sp)
	w := bufio.NewWriter(os.Stdout)
	enc := json.NewEncoder(w)
	for _, r := range recs {
		_ = enc.Encode(r)
	}
	_ = enc.Encode(helperSummary{Done: true, Answered: answered.Load()})
	_ = w.Flush()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos helper:", err)
		return 1
	}
	return 0
}

// Table renders results as a Markdown table.
func Table(rs []Result) string {
	var b strings.Builder
	b.WriteString("| scenario | backend | seed | clients | acquisitions | overlaps (mutex) | lost updates | fence rejects | non-linearizable keys | unavailability | faults injected | verdict |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		nl := fmt.Sprint(r.NonLinear)
		if r.Unknown > 0 {
			nl += fmt.Sprintf(" (+%d timed out)", r.Unknown)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %d | %s | %v | %d: %s | %s |\n",
			r.Scenario, r.Backend, r.Seed, r.Clients, r.Acquisitions, r.Overlaps, r.Lost, r.Rejected, nl,
			r.Unavail.Round(time.Millisecond), r.Faults, r.FaultKinds, r.Verdict())
	}
	b.WriteString(WatchdogTable(rs))
	return b.String()
}
