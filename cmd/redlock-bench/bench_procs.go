package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redlock-go/redlock/observe"
)

// benchWorkerEnv is set in the environment of the processes the processes
// scenario starts. The test binary (os.Executable under go test) runs the
// command line itself when it is set, instead of the tests (see TestMain).
const benchWorkerEnv = "REDLOCK_BENCH_WORKER"

// ProcStat describes the hot key shared by several processes: each runs
// workers on the key with its own lock client, 1 ms inside.
type ProcStat struct {
	Processes    int     `json:"processes"`
	Workers      int     `json:"workers_per_process"`
	Acquisitions int     `json:"acquisitions"`
	Utilization  float64 `json:"utilization"` // held time of all processes / wall time
	WaitP50us    float64 `json:"wait_p50_us"`
	WaitP99us    float64 `json:"wait_p99_us"`
	WaitMaxUs    float64 `json:"wait_max_us"`
	PerProcess   []int   `json:"per_process"`     // acquisitions of each process
	ProcMinMax   float64 `json:"process_min_max"` // fewest acquisitions of a process / most
	WorkerMinMax float64 `json:"worker_min_max"`  // the same over every worker of every process
	Fairness     float64 `json:"fairness"`        // Jain's index over every worker
	Errors       int     `json:"errors"`          // Lock calls that failed before the run's end
	// Handoff sums the processes' hand-off counters (ours only).
	Handoff *HandoffStat `json:"handoff,omitempty"`
}

// workerReport is what one `redlock-bench worker` process prints: its run
// of hammer, with wall-clock times so that the parent can line the
// processes up.
type workerReport struct {
	Counts  []int                 `json:"counts"`
	BusyNs  int64                 `json:"busy_ns"`
	WaitsNs []int64               `json:"waits_ns"`
	Errors  int                   `json:"errors"`
	StartNs int64                 `json:"start_unix_ns"`
	EndNs   int64                 `json:"end_unix_ns"`
	Handoff *HandoffStat          `json:"handoff,omitempty"`
	Stats   *observe.HandoffStats `json:"handoff_stats,omitempty"` // at the end, for the subscriptions' health
}

// benchWorkerCmd is `redlock-bench worker --lib L --nodes URLS --workers W
// --duration D --key K`, the process the processes scenario starts (not
// meant to be run by hand): it connects, prints "ready", waits for a line
// on stdin, runs W workers on key K for D (1 ms inside) and prints a
// workerReport as one JSON line.
func benchWorkerCmd(fs *flag.FlagSet) runner {
	lib := fs.String("lib", "redlock", "redlock, redlock-fair, redsync or single-node")
	nodesFlag := fs.String("nodes", "", "comma-separated redis:// `URLS` (required)")
	workers := fs.Int("workers", 8, "workers in this process")
	dur := fs.Duration("duration", 10*time.Second, "how long to run")
	hold := fs.Duration("hold", time.Millisecond, "time inside the critical section")
	key := fs.String("key", "hotproc", "the key")
	return func(_ []string, out, _ io.Writer) error {
		urls := splitList(*nodesFlag)
		if len(urls) == 0 || *workers < 1 || *dur <= 0 {
			return usageErr("bench worker: --nodes, --workers and --duration are required")
		}
		c, err := contenderByName(*lib, urls)
		if err != nil {
			return usageErr("bench worker: %v", err)
		}
		defer c.close()
		// One cycle on a key of its own opens the connections before the start.
		if unlock, err := c.try(context.Background(), fmt.Sprintf("%s:warm:%d", *key, os.Getpid())); err == nil {
			_ = unlock()
		}
		fmt.Fprintln(out, "ready")
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			return fmt.Errorf("bench worker: waiting for the start: %w", err)
		}
		var before observe.HandoffStats
		h, isH := c.(handoffer)
		if isH {
			before = h.handoffStats()
		}
		r := hammer(c, *key, *workers, *dur, *hold)
		rep := workerReport{Counts: r.counts, BusyNs: int64(r.busy), Errors: r.errs, StartNs: r.start.UnixNano(), EndNs: r.end.UnixNano()}
		for _, w := range r.waits {
			rep.WaitsNs = append(rep.WaitsNs, int64(w))
		}
		if isH {
			after := h.handoffStats()
			rep.Handoff, rep.Stats = handoffDelta(before, after, len(r.waits)), &after
		}
		return json.NewEncoder(out).Encode(rep)
	}
}

// processes runs procs processes of workers each (the bench binary
// itself, `bench worker`) on one key for dur, started together, and
// aggregates their reports.
func processes(lib string, urls []string, procs, workers int, dur time.Duration, key string) (ProcStat, error) {
	exe, err := os.Executable()
	if err != nil {
		return ProcStat{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), dur+2*time.Minute)
	defer cancel()
	type proc struct {
		cmd    *exec.Cmd
		stdin  io.WriteCloser
		stdout *bufio.Reader
		stderr bytes.Buffer
	}
	ps := make([]*proc, procs)
	defer func() { // on every path: no process outlives the scenario
		for _, p := range ps {
			if p == nil {
				continue
			}
			_ = p.stdin.Close()
			if p.cmd.ProcessState == nil {
				_ = p.cmd.Process.Kill()
				_ = p.cmd.Wait()
			}
		}
	}()
	for i := range ps {
		p := &proc{}
		p.cmd = exec.CommandContext(ctx, exe, "worker", "--lib", lib, "--nodes", strings.Join(urls, ","),
			"--workers", strconv.Itoa(workers), "--duration", dur.String(), "--key", key)
		p.cmd.Env = append(os.Environ(), benchWorkerEnv+"=1")
		p.cmd.Stderr = &p.stderr
		if p.stdin, err = p.cmd.StdinPipe(); err != nil {
			return ProcStat{}, err
		}
		out, err := p.cmd.StdoutPipe()
		if err != nil {
			return ProcStat{}, err
		}
		p.stdout = bufio.NewReader(out)
		if err := p.cmd.Start(); err != nil {
			return ProcStat{}, err
		}
		ps[i] = p
	}
	fail := func(i int, err error) error {
		return fmt.Errorf("process %d: %w: %s", i+1, err, strings.TrimSpace(ps[i].stderr.String()))
	}
	for i, p := range ps {
		line, err := p.stdout.ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "ready" {
			return ProcStat{}, fail(i, fmt.Errorf("not ready (%q, %v)", line, err))
		}
	}
	for i, p := range ps { // all connected: start them together
		if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
			return ProcStat{}, fail(i, err)
		}
	}
	reps := make([]workerReport, procs)
	errs := make([]error, procs)
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			line, err := p.stdout.ReadBytes('\n')
			if err == nil {
				err = json.Unmarshal(line, &reps[i])
			}
			if werr := p.cmd.Wait(); err == nil {
				err = werr
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return ProcStat{}, fail(i, err)
		}
	}
	return aggregate(reps, workers), nil
}

// aggregate folds the processes' reports into one ProcStat.
func aggregate(reps []workerReport, workers int) ProcStat {
	s := ProcStat{Processes: len(reps), Workers: workers}
	var all []int
	var waits []time.Duration
	var busy int64
	var start, end int64
	for i, r := range reps {
		n := 0
		for _, c := range r.Counts {
			n += c
		}
		s.PerProcess = append(s.PerProcess, n)
		s.Acquisitions += n
		s.Errors += r.Errors
		all = append(all, r.Counts...)
		busy += r.BusyNs
		for _, w := range r.WaitsNs {
			waits = append(waits, time.Duration(w))
		}
		if i == 0 || r.StartNs < start {
			start = r.StartNs
		}
		end = max(end, r.EndNs)
		if r.Handoff != nil {
			if s.Handoff == nil {
				s.Handoff = &HandoffStat{}
			}
			s.Handoff.add(r.Handoff)
		}
	}
	if end > start {
		s.Utilization = float64(busy) / float64(end-start)
	}
	s.ProcMinMax, s.WorkerMinMax, s.Fairness = minMax(s.PerProcess), minMax(all), jain(all)
	if len(waits) > 0 {
		s.WaitP50us, s.WaitP99us, s.WaitMaxUs = us(quantile(waits, 0.5)), us(quantile(waits, 0.99)), us(quantile(waits, 1))
	}
	if s.Handoff != nil && s.Acquisitions > 0 {
		s.Handoff.PassedShare = s.Handoff.Passed / float64(s.Acquisitions)
	}
	return s
}

// mergeProcs is the median of every figure over the runs (per process:
// the median of each process's count, sorted); errors are summed.
func mergeProcs(ps []ProcStat) ProcStat {
	if len(ps) == 0 {
		return ProcStat{}
	}
	m := func(f func(ProcStat) float64) float64 { return median(ps, f) }
	out := ProcStat{
		Processes: ps[0].Processes, Workers: ps[0].Workers,
		Acquisitions: int(m(func(p ProcStat) float64 { return float64(p.Acquisitions) })),
		Utilization:  m(func(p ProcStat) float64 { return p.Utilization }),
		WaitP50us:    m(func(p ProcStat) float64 { return p.WaitP50us }),
		WaitP99us:    m(func(p ProcStat) float64 { return p.WaitP99us }),
		WaitMaxUs:    m(func(p ProcStat) float64 { return p.WaitMaxUs }),
		ProcMinMax:   m(func(p ProcStat) float64 { return p.ProcMinMax }),
		WorkerMinMax: m(func(p ProcStat) float64 { return p.WorkerMinMax }),
		Fairness:     m(func(p ProcStat) float64 { return p.Fairness }),
		Handoff:      mergeHandoff(each(ps, func(p ProcStat) *HandoffStat { return p.Handoff })),
	}
	for _, p := range ps {
		out.Errors += p.Errors
	}
	sorted := each(ps, func(p ProcStat) []int { s := slices.Clone(p.PerProcess); slices.Sort(s); return s })
	for i := range sorted[0] {
		out.PerProcess = append(out.PerProcess, int(median(sorted, func(s []int) float64 {
			if i < len(s) {
				return float64(s[i])
			}
			return 0
		})))
	}
	return out
}
