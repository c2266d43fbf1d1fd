package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMedianAndMerge(t *testing.T) {
	id := func(v float64) float64 { return v }
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.in, id); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	run := func(p50, cps float64, cycles, errs int, allocs int64) *Results {
		r := newResults()
		r.Uncontended[5] = map[string]Stat{"redlock": {P50us: p50, P99us: 2 * p50, CyclesPerSec: cps, Cycles: cycles, Errors: errs}}
		r.Allocs["redlock"] = AllocStat{AllocsPerCycle: allocs}
		r.Contention[8] = map[string]ContStat{"redlock": {Acquisitions: cycles, Utilization: p50 / 1000}}
		return r
	}
	m := merge([]*Results{run(100, 10, 5, 1, 90), run(300, 30, 5, 0, 95), run(200, 20, 5, 2, 93)})
	s := m.Uncontended[5]["redlock"]
	if s.P50us != 200 || s.P99us != 400 || s.CyclesPerSec != 20 || s.Cycles != 15 || s.Errors != 3 {
		t.Errorf("merged stat = %+v, want medians 200/400/20 and totals 15/3", s)
	}
	if a := m.Allocs["redlock"].AllocsPerCycle; a != 93 {
		t.Errorf("merged allocs = %d, want 93", a)
	}
	if u := m.Contention[8]["redlock"].Utilization; u != 0.2 {
		t.Errorf("merged utilization = %v, want 0.2", u)
	}

	if got := minMax([]int{5, 10, 8}); got != 0.5 {
		t.Errorf("minMax = %v, want 0.5", got)
	}
	if got := minMax([]int{0, 0}); got != 0 {
		t.Errorf("minMax of zeros = %v, want 0", got)
	}
	// Two processes' reports: sums, the wall time from the first start
	// to the last end, the min:max per process and per worker.
	ms := int64(time.Millisecond)
	p := aggregate([]workerReport{
		{Counts: []int{3, 1}, BusyNs: 4 * ms, WaitsNs: []int64{ms, ms, ms, 9 * ms}, StartNs: 10 * ms, EndNs: 15 * ms, Handoff: &HandoffStat{Passed: 2}},
		{Counts: []int{2, 2}, BusyNs: 4 * ms, WaitsNs: []int64{ms, ms, ms, ms}, StartNs: 11 * ms, EndNs: 20 * ms, Handoff: &HandoffStat{Passed: 1, Notified: 1}},
	}, 2)
	if p.Acquisitions != 8 || p.Utilization != 0.8 || !slices.Equal(p.PerProcess, []int{4, 4}) || p.ProcMinMax != 1 ||
		p.WorkerMinMax != 1.0/3 || p.WaitMaxUs != 9000 || p.Handoff.Passed != 3 || p.Handoff.PassedShare != 3.0/8 || p.Handoff.Notified != 1 {
		t.Errorf("aggregate = %+v, handoff %+v", p, p.Handoff)
	}
	mp := mergeProcs([]ProcStat{{PerProcess: []int{1, 5}, Utilization: 0.9, Errors: 1}, {PerProcess: []int{3, 2}, Utilization: 0.5, Errors: 2},
		{PerProcess: []int{4, 4}, Utilization: 0.7}})
	if !slices.Equal(mp.PerProcess, []int{2, 4}) || mp.Utilization != 0.7 || mp.Errors != 3 || mp.Handoff != nil {
		t.Errorf("mergeProcs = %+v", mp)
	}
	mw := mergeWatch([]WatchStat{{Locks: 10, CPUms: 1, RenewFailed: 1}, {Locks: 10, CPUms: 3}, {Locks: 10, CPUms: 2, Lost: 4}})
	if mw.Locks != 10 || mw.CPUms != 2 || mw.RenewFailed != 1 || mw.Lost != 4 {
		t.Errorf("mergeWatch = %+v", mw)
	}
	info := "# Commandstats\r\ncmdstat_eval:calls=7,usec=1\r\ncmdstat_evalsha:calls=42,usec=99,usec_per_call=2.3\r\n"
	if e, es, x := commandCalls(info, "eval"), commandCalls(info, "evalsha"), commandCalls(info, "set"); e != 7 || es != 42 || x != 0 {
		t.Errorf("commandCalls: eval %d, evalsha %d, set %d", e, es, x)
	}
}

// The hot-key row's new figures: min:max per worker and, for ours, the
// hand-off counters (a short run; no figure is judged).
func TestContentionHandoffFields(t *testing.T) {
	urls := nodes(t, 3)
	o, err := newOurs(urls)
	if err != nil {
		t.Fatal(err)
	}
	defer o.close()
	s := contention(o, 4, 500*time.Millisecond)
	if s.Acquisitions == 0 || s.MinMax < 0 || s.MinMax > 1 || s.Handoff == nil ||
		s.Handoff.Passed+s.Handoff.Notified+s.Handoff.Local+s.Handoff.Promoted+s.Handoff.Timer == 0 {
		t.Fatalf("contention = %+v, handoff %+v", s, s.Handoff)
	}
}

// The new scenarios at tiny sizes: 2 processes x 2 workers (this test
// binary started again as `bench worker`) and 10 watchdog locks; the JSON
// and the markdown carry their fields. Figures are not judged.
func TestBenchProcessesWatchdog(t *testing.T) {
	_, r, dir := runBench(t, []string{"Hot key across processes: 2 processes x 2 workers", "Cost of held locks", "no process starved", "Time per scenario"},
		"--quick", "--only", "processes,watchdog", "--processes", "2x2", "--watchdog-locks", "10")
	for _, lib := range []string{"redlock", "redsync"} {
		p := r.Processes[lib]
		if p.Processes != 2 || p.Workers != 2 || len(p.PerProcess) != 2 || p.Acquisitions == 0 || p.Utilization <= 0 || p.WaitMaxUs <= 0 {
			t.Errorf("processes, %s: %+v", lib, p)
		}
		if (lib == "redlock") != (p.Handoff != nil) {
			t.Errorf("processes, %s: handoff %+v", lib, p.Handoff)
		}
		w := r.Watchdog[10][lib]
		// Renewals may time out on a loaded machine: that they were tried
		// (made or failed) is what is checked, not that they succeeded.
		if w.Locks != 10 || w.EveryMs <= 0 || w.WindowMs <= 0 || w.Renewals+float64(w.RenewFailed+w.NotAcquired) <= 0 {
			t.Errorf("watchdog, %s: %+v", lib, w)
		}
	}
	// The raw keys, as a reader of the JSON sees them.
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"hot_key_processes"`, `"process_min_max"`, `"worker_min_max"`, `"watchdog_cost_by_locks"`,
		`"round_trips_per_interval"`, `"cpu_ms_per_interval"`, `"goroutines_idle"`, `"heap_bytes_per_lock"`, `"seconds_by_scenario"`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("results.json lacks %s", key)
		}
	}
}

func TestBenchBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--only", "bogus"}, {"--repeat", "-1"}, {"--nope"},
		{"--processes", "3"}, {"--processes", "0x8"}, {"--watchdog-locks", "10,x"}, {"--watchdog-locks", "0"}, {"--nodes", "0"}, {"--nodes", "1,x"}, {"--processes-libs", "redlock,bogus"}, {"--processes-libs", "redlock-handoff-x"},
		{"worker", "--lib", "bogus", "--nodes", "redis://127.0.0.1:1"}, {"worker"}, {"extra"}} {
		if code, _, errOut := runCmd(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, exitUsage, errOut)
		}
	}
}

// A short real run of two scenarios, repeated: files written, medians over
// both runs, the runs kept in the JSON.
func TestBenchOnlyRepeat(t *testing.T) {
	out, r, dir := runBench(t, []string{"median of 2 runs", "Independent keys", "Allocations per acquire+release", "allocations per acquire+release, 5 nodes: <= 40"},
		"--quick", "--only", "independent,allocs", "--repeat", "2")
	if strings.Contains(out, "Uncontended") {
		t.Errorf("--only ran the uncontended scenario:\n%s", out)
	}
	// Whether cycles succeed depends on the machine (a loaded one under
	// -race times out at the 50ms node timeout): only that it ran is checked.
	ind := r.Independent["redlock"]
	if r.Repeat != 2 || len(r.Runs) != 2 || ind.Cycles+ind.Errors <= 0 || r.Allocs["redsync"].AllocsPerCycle <= 0 {
		t.Fatalf("results.json: repeat %d, %d runs, independent %+v, allocs %+v", r.Repeat, len(r.Runs), r.Independent, r.Allocs)
	}
	if _, err := os.Stat(filepath.Join(dir, "results.md")); err != nil {
		t.Fatal(err)
	}
}

// The scaling scenario at --quick sizes, with the single-node
// alternatives (bsm/redislock, rueidislock) on the first node: every
// contender has a figure at every goroutine count, results.md has the
// table, the legend and the plot's link, the PNG is written. Figures are
// not judged.
func TestBenchScalingAlternatives(t *testing.T) {
	out, r, dir := runBench(t, []string{"Scaling: independent keys", "bsm/redislock (1 node)", "rueidislock (1 node)", "what each guarantees",
		"scaling_independent.png"}, "--quick", "--only", "scaling")
	if strings.Contains(out, "Uncontended") || strings.Contains(out, "Independent keys, 64") {
		t.Errorf("--only scaling ran other scenarios:\n%s", out)
	}
	for _, g := range scalingGoroutines {
		for _, lib := range scalingLibs() {
			if s, ok := r.Scaling[g][lib]; !ok || s.Cycles+s.Errors <= 0 {
				t.Errorf("scaling, %d goroutines, %s: %+v (present %v)", g, lib, s, ok)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "scaling_independent.png")); err != nil {
		t.Error(err)
	}
}

// The watchdog plots from whatever sizes ran: one size, CPU within the
// noise (0) for one library, and an empty section do not fail.
func TestPlotsWatchdogSizes(t *testing.T) {
	for _, w := range []map[int]map[string]WatchStat{
		{10: {"redlock": {RoundTrips: 1}, "redsync": {RoundTrips: 10, CPUms: 0.5}}},
		{10: {"redlock": {RoundTrips: 2, CPUms: 1}, "redsync": {RoundTrips: 10, CPUms: 2}},
			100000: {"redlock": {RoundTrips: 400, CPUms: 30}, "redsync": {RoundTrips: 100000, CPUms: 9000}}},
		{10: {"redlock": {}, "redsync": {}}},
	} {
		r := newResults()
		r.Watchdog = w
		dir := t.TempDir()
		got, err := plots(r, dir)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, []string{"watchdog_calls_vs_locks.png", "watchdog_cpu_vs_locks.png"}) {
			t.Errorf("plots = %v", got)
		}
		for _, f := range got {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Error(err)
			}
		}
	}
}

// runBench runs `redlock-bench ARGS --out DIR`, fails the test unless it
// exits 0 with every string of wants in its output, and returns the
// output, the results.json it wrote and the directory it wrote to.
func runBench(t *testing.T, wants []string, args ...string) (string, Results, string) {
	t.Helper()
	dir := t.TempDir()
	code, out, errOut := runCmd(t, append(args, "--out", dir)...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range wants {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return out, r, dir
}
