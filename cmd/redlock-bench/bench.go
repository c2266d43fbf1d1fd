package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe"
)

// Stat is a latency summary of one contender in one scenario.
type Stat struct {
	Cycles       int     `json:"cycles"`
	P50us        float64 `json:"p50_us"`
	P99us        float64 `json:"p99_us"`
	MaxUs        float64 `json:"max_us"`
	CyclesPerSec float64 `json:"cycles_per_sec"`
	Errors       int     `json:"errors"`
}

// ContStat describes one hot-key contention run.
type ContStat struct {
	Acquisitions int     `json:"acquisitions"`
	Utilization  float64 `json:"utilization"` // share of the time someone held the lock
	WaitP50us    float64 `json:"wait_p50_us"`
	WaitP99us    float64 `json:"wait_p99_us"`
	WaitMaxUs    float64 `json:"wait_max_us"`
	Fairness     float64 `json:"fairness"` // Jain's index over per-worker acquisitions
	MinMax       float64 `json:"min_max"`  // fewest acquisitions of any worker / most
	Errors       int     `json:"errors"`   // Lock calls that failed before the run's end
	// Handoff: how our waits ended and how many acquisitions were passed
	// on inside the process (nil for the others).
	Handoff *HandoffStat `json:"handoff,omitempty"`
}

// AllocStat is allocations per acquire+release cycle.
type AllocStat struct {
	AllocsPerCycle int64 `json:"allocs_per_cycle"`
	BytesPerCycle  int64 `json:"bytes_per_cycle"`
}

// Results of one bench run: with --repeat N, every figure is the median of
// the N runs (cycle and error counts are totals), and Runs keeps each run.
type Results struct {
	Date        string                       `json:"date"`
	Quick       bool                         `json:"quick"`
	Repeat      int                          `json:"repeat"`
	Machine     string                       `json:"machine"`
	Uncontended map[int]map[string]Stat      `json:"uncontended_by_nodes"`
	SlowNode    map[string]map[string]Stat   `json:"one_of_five_slow"`
	Contention  map[int]map[string]ContStat  `json:"hot_key_by_workers"`
	Processes   map[string]ProcStat          `json:"hot_key_processes,omitempty"`
	Independent map[string]Stat              `json:"independent_keys_64"`
	Scaling     map[int]map[string]Stat      `json:"independent_keys_by_goroutines,omitempty"`
	Allocs      map[string]AllocStat         `json:"allocs_5_nodes"`
	Watchdog    map[int]map[string]WatchStat `json:"watchdog_cost_by_locks,omitempty"`
	// The lock types: uncontended per type (typeLabels), and the
	// read-mostly hot key with the read-write lock ("rw") and the plain one.
	TypesUncontended map[string]Stat    `json:"types_uncontended,omitempty"`
	ReadMostly       map[string]MixStat `json:"types_read_mostly,omitempty"`
	// Durable votes: per fsync mode (durableModes), per contender.
	Durable        map[string]map[string]DurableStat `json:"durable_votes,omitempty"`
	DurableSkipped string                            `json:"durable_votes_skipped,omitempty"`
	Goals          []Goal                            `json:"goals,omitempty"`
	// Seconds is the time each scenario took (summed over the runs).
	Seconds map[string]float64 `json:"seconds_by_scenario,omitempty"`
	Runs    []*Results         `json:"runs,omitempty"`
}

func newResults() *Results {
	return &Results{Uncontended: map[int]map[string]Stat{}, SlowNode: map[string]map[string]Stat{},
		Contention: map[int]map[string]ContStat{}, Processes: map[string]ProcStat{}, Independent: map[string]Stat{},
		Scaling: map[int]map[string]Stat{}, Allocs: map[string]AllocStat{}, Watchdog: map[int]map[string]WatchStat{}, Seconds: map[string]float64{}}
}

// Goal is one target of issue 4 and whether this run met it.
type Goal struct {
	Goal   string `json:"goal"`
	Figure string `json:"figure"`
	Met    bool   `json:"met"`
}

type benchCfg struct {
	iters       int            // uncontended cycles per contender and N
	block       int            // cycles per contender before switching
	slowIters   map[string]int // redsync caps per slow scenario (per run)
	contention  time.Duration  // hot key, in one process and across processes
	independent time.Duration
	mix         time.Duration // each run of the lock types' read-mostly hot key
	scaling     time.Duration // per contender and goroutine count
	scalingG    []int         // goroutine counts of the scaling scenario
	ns          []int
	procs       int      // processes of the cross-process hot key
	procWorkers int      // workers in each
	procLibs    []string // the contenders of the cross-process hot key
	watch       watchCfg
	repeat      int
	only        map[string]bool // scenarios to run; all when empty
}

// scenarios are the names --only accepts, in the order they run.
var scenarios = []string{"uncontended", "slow", "contention", "processes", "independent", "scaling", "allocs", "watchdog", "types", "durable"}

func (c benchCfg) runs(name string) bool { return len(c.only) == 0 || c.only[name] }

// benchCmd is the side-by-side benchmark; `bench worker` (benchWorkerCmd)
// is the process its processes scenario starts.
func benchCmd(fs *flag.FlagSet) runner {
	quick := fs.Bool("quick", false, "short run (about a minute) for tests and CI")
	outFlag := fs.String("out", "", "`DIR` for results.json, results.md and the PNG plots (default: docs/bench when run from cmd/redlock-bench in the repository, else ./bench-results)")
	repeat := fs.Int("repeat", 0, "runs of the whole benchmark; figures are medians over them (default 3, 1 with --quick)")
	only := fs.String("only", "", "comma-separated `SCENARIOS` to run: "+strings.Join(scenarios, ", ")+" (default: all)")
	procs := fs.String("processes", "", "processes x workers of the cross-process hot key (default 3x8)")
	procLibs := fs.String("processes-libs", "", "comma-separated `LIBS` of the cross-process hot key: redlock, redlock-fair, redsync, redlock-handoff-N (WithLocalHandoff(N, 0)) (default redlock,redlock-fair,redsync)")
	nodeCounts := fs.String("nodes", "", "comma-separated node counts of the uncontended scenario (default 1,3,5,7,9; 1,3,5 with --quick)")
	locks := fs.String("watchdog-locks", "", "comma-separated counts of locks held in watchdog mode (default 10,1000,10000; 10,1000 with --quick)")
	return func(_ []string, out, errOut io.Writer) error {
		cfg := benchCfg{iters: 2000, block: 100, contention: 10 * time.Second, independent: 4 * time.Second, mix: 5 * time.Second, ns: []int{1, 3, 5, 7, 9},
			scaling: time.Second, scalingG: scalingGoroutines,
			slowIters: map[string]int{"+2ms": 100, "+20ms": 20, "+200ms": 3, "frozen": 1}, procs: 3, procWorkers: 8,
			watch: watchCfg{locks: []int{10, 1000, 10000}, lease: watchLease, every: watchEvery, intervals: 1}, repeat: 3}
		if *quick {
			cfg = benchCfg{iters: 200, block: 50, contention: 1500 * time.Millisecond, independent: time.Second, mix: time.Second, ns: []int{1, 3, 5},
				scaling: 200 * time.Millisecond, scalingG: scalingGoroutines,
				slowIters: map[string]int{"+2ms": 30, "+20ms": 10, "+200ms": 2, "frozen": 1}, procs: 3, procWorkers: 8,
				watch: watchCfg{locks: []int{10, 1000}, lease: watchLease, every: watchEvery, intervals: 1}, repeat: 1}
		}
		if *procs != "" {
			if _, err := fmt.Sscanf(*procs, "%dx%d", &cfg.procs, &cfg.procWorkers); err != nil || cfg.procs < 1 || cfg.procWorkers < 1 {
				return usageErr("--processes %q: want PxW, e.g. 3x8", *procs)
			}
		}
		cfg.procLibs = []string{"redlock", "redlock-fair", "redsync"}
		if *procLibs != "" {
			cfg.procLibs = splitList(*procLibs)
			for _, l := range cfg.procLibs {
				if !knownContender(l) {
					return usageErr("--processes-libs: %v", unknownContender(l))
				}
			}
		}
		if *locks != "" {
			cfg.watch.locks = nil
			for _, f := range splitList(*locks) {
				var n int
				if _, err := fmt.Sscanf(f, "%d", &n); err != nil || n < 1 || fmt.Sprint(n) != f {
					return usageErr("--watchdog-locks %q: want positive counts, e.g. 10,1000", *locks)
				}
				cfg.watch.locks = append(cfg.watch.locks, n)
			}
		}
		if *nodeCounts != "" {
			cfg.ns = nil
			for _, f := range splitList(*nodeCounts) {
				var n int
				if _, err := fmt.Sscanf(f, "%d", &n); err != nil || n < 1 || fmt.Sprint(n) != f {
					return usageErr("--nodes %q: want positive counts, e.g. 1,5", *nodeCounts)
				}
				cfg.ns = append(cfg.ns, n)
			}
		}
		if *repeat < 0 {
			return usageErr("--repeat %d: must be at least 1", *repeat)
		} else if *repeat > 0 {
			cfg.repeat = *repeat
		}
		if *only != "" {
			cfg.only = map[string]bool{}
			for _, name := range splitList(*only) {
				if !slices.Contains(scenarios, name) {
					return usageErr("--only: unknown scenario %q (have %s)", name, strings.Join(scenarios, ", "))
				}
				cfg.only[name] = true
			}
		}
		outDir := *outFlag
		if outDir == "" {
			outDir = defaultOutDir()
		}
		if _, err := exec.LookPath("redis-server"); err != nil {
			return errors.New("bench needs redis-server on PATH (apt-get install -y redis-server)")
		}
		if err := os.MkdirAll(outDir, 0o755); err != nil {
			return err
		}
		steps := 0
		for _, name := range scenarios {
			if cfg.runs(name) {
				steps += map[string]int{"uncontended": len(cfg.ns), "slow": 5, "contention": 2, "processes": 1, "independent": 1, "scaling": len(cfg.scalingG), "allocs": 1,
					"watchdog": len(cfg.watch.locks), "types": 2, "durable": len(durableModes)}[name]
			}
		}
		p := &progress{w: errOut, total: steps * cfg.repeat}
		var runs []*Results
		for r := 0; r < cfg.repeat; r++ {
			p.run = fmt.Sprintf("run %d/%d", r+1, cfg.repeat)
			res, err := benchOnce(cfg, r, p)
			if err != nil {
				return err
			}
			runs = append(runs, res)
		}
		p.done()
		res := merge(runs)
		res.Date = time.Now().UTC().Format(time.RFC3339)
		res.Quick, res.Repeat = *quick, cfg.repeat
		res.Machine = fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
		res.Goals = goals(res)
		if cfg.repeat > 1 {
			res.Runs = runs
		}
		md := markdown(res)
		fmt.Fprint(out, md)
		if err := os.WriteFile(filepath.Join(outDir, "results.md"), []byte(md), 0o644); err != nil {
			return err
		}
		js, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(filepath.Join(outDir, "results.json"), js, 0o644); err != nil {
			return err
		}
		pngs, err := plots(res, outDir)
		if err != nil {
			return fmt.Errorf("plots: %w", err)
		}
		fmt.Fprintf(out, "\nwrote %s/{%s}\n", outDir, strings.Join(append([]string{"results.md", "results.json"}, pngs...), ","))
		return nil
	}
}

// benchOnce runs every selected scenario once (run r of the repeats),
// each on fresh nodes, and records how long each took.
func benchOnce(cfg benchCfg, r int, p *progress) (*Results, error) {
	res := newResults()
	timed := func(name string, fn func() error) error {
		t0 := time.Now()
		err := fn()
		res.Seconds[name] += time.Since(t0).Seconds()
		return err
	}
	if cfg.runs("uncontended") {
		for _, n := range cfg.ns {
			p.step(fmt.Sprintf("uncontended, %d nodes", n))
			if err := timed("uncontended", func() error {
				return withNodes(n, func(nodes []*node, urls []string) error {
					cs, err := newAllContenders(urls) // the single-node alternatives on the first node
					if err != nil {
						return err
					}
					fenced, err := newOursAs("redlock-fenced", urls, redlock.WithFencing())
					if err != nil {
						closeContenders(cs)
						return err
					}
					cs = append(cs, fenced) // the cost of fencing tokens, beside the same library without
					defer closeContenders(cs)
					res.Uncontended[n] = uncontended(cs, cfg.iters, cfg.block, nil)
					return nil
				})
			}); err != nil {
				return nil, err
			}
		}
	}
	if cfg.runs("slow") {
		if err := timed("slow", func() error {
			return withNodes(5, func(nodes []*node, urls []string) error {
				return slowScenarios(cfg, nodes, urls, res, p)
			})
		}); err != nil {
			return nil, err
		}
	}
	if cfg.runs("contention") || cfg.runs("processes") || cfg.runs("independent") || cfg.runs("scaling") || cfg.runs("allocs") {
		err := withNodes(5, func(nodes []*node, urls []string) error {
			cs, err := newAllContenders(urls) // the single-node alternatives on the first node
			if err != nil {
				return err
			}
			defer closeContenders(cs)
			if cfg.runs("contention") {
				_ = timed("contention", func() error {
					for _, w := range []int{8, 64} {
						p.step(fmt.Sprintf("hot key, %d workers", w))
						res.Contention[w] = map[string]ContStat{}
						for _, c := range cs {
							res.Contention[w][c.name()] = contention(c, w, cfg.contention)
						}
					}
					return nil
				})
			}
			if cfg.runs("processes") {
				p.step(fmt.Sprintf("hot key, %d processes x %d workers", cfg.procs, cfg.procWorkers))
				if err := timed("processes", func() error {
					for _, lib := range alternate(cfg.procLibs, r) {
						s, err := processes(lib, urls, cfg.procs, cfg.procWorkers, cfg.contention, fmt.Sprintf("hotproc:%s:%d", lib, r))
						if err != nil {
							return fmt.Errorf("processes, %s: %w", lib, err)
						}
						res.Processes[lib] = s
					}
					return nil
				}); err != nil {
					return err
				}
			}
			if cfg.runs("independent") {
				p.step("independent keys, 64 goroutines")
				_ = timed("independent", func() error {
					for _, c := range cs {
						res.Independent[c.name()] = independent(c, 64, cfg.independent)
					}
					co, err := newOursAs("redlock-no-coalescing", urls, redlock.WithoutCoalescing())
					if err != nil {
						return err
					}
					defer co.close()
					res.Independent[co.name()] = independent(co, 64, cfg.independent)
					return nil
				})
			}
			if cfg.runs("scaling") {
				_ = timed("scaling", func() error {
					for _, g := range cfg.scalingG {
						p.step(fmt.Sprintf("scaling, %d goroutines", g))
						res.Scaling[g] = map[string]Stat{}
						for _, c := range alternateC(cs, r+len(res.Scaling)) {
							res.Scaling[g][c.name()] = independent(c, g, cfg.scaling)
						}
					}
					return nil
				})
			}
			if cfg.runs("allocs") {
				p.step("allocations per cycle")
				testing.Init()
				_ = timed("allocs", func() error {
					for _, c := range cs {
						res.Allocs[c.name()] = allocs(c)
					}
					return nil
				})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if cfg.runs("watchdog") {
		if err := timed("watchdog", func() error {
			return withNodes(5, func(nodes []*node, urls []string) error {
				for _, n := range cfg.watch.locks {
					p.step(fmt.Sprintf("watchdog cost, %d locks", n))
					res.Watchdog[n] = map[string]WatchStat{}
					for _, lib := range alternate([]string{"redlock", "redsync"}, r) {
						s, err := watchdogCost(lib, urls, n, cfg.watch)
						if err != nil {
							return fmt.Errorf("watchdog cost, %s, %d locks: %w", lib, n, err)
						}
						res.Watchdog[n][lib] = s
					}
				}
				return nil
			})
		}); err != nil {
			return nil, err
		}
	}
	if cfg.runs("types") {
		if err := timed("types", func() error {
			return withNodes(5, func(_ []*node, urls []string) error { return typesScenario(cfg, urls, res, p) })
		}); err != nil {
			return nil, err
		}
	}
	if cfg.runs("durable") {
		if err := timed("durable", func() error { return durableScenario(cfg, res, p) }); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// procTableLibs lists the cross-process hot key's contenders in table
// order: redlock, redlock-fair, redsync, then the others by name.
func procTableLibs(m map[string]ProcStat) []string {
	libs := []string{"redlock", "redlock-fair", "redsync"}
	var more []string
	for l := range m {
		if !slices.Contains(libs, l) {
			more = append(more, l)
		}
	}
	sort.Strings(more)
	return append(libs, more...)
}

// alternate returns libs in order for even runs and reversed for odd ones,
// so that neither always goes first.
func alternate(libs []string, run int) []string {
	out := append([]string(nil), libs...)
	if run%2 == 1 {
		slices.Reverse(out)
	}
	return out
}

// scalingGoroutines are the goroutine counts of the scaling scenario.
var scalingGoroutines = []int{1, 4, 16, 64, 256}

// alternateC is cs in order for even k and reversed for odd ones.
func alternateC(cs []contender, k int) []contender {
	out := append([]contender(nil), cs...)
	if k%2 == 1 {
		slices.Reverse(out)
	}
	return out
}

// merge folds runs into one Results: the median of every figure, the sum
// of cycle, acquisition and error counts.
func merge(runs []*Results) *Results {
	if len(runs) == 1 {
		return runs[0]
	}
	out := newResults()
	for n, ms := range group(each(runs, func(r *Results) map[int]map[string]Stat { return r.Uncontended })) {
		out.Uncontended[n] = mergeStats(ms)
	}
	for k, ms := range group(each(runs, func(r *Results) map[string]map[string]Stat { return r.SlowNode })) {
		out.SlowNode[k] = mergeStats(ms)
	}
	out.Independent = mergeStats(each(runs, func(r *Results) map[string]Stat { return r.Independent }))
	for g, ms := range group(each(runs, func(r *Results) map[int]map[string]Stat { return r.Scaling })) {
		out.Scaling[g] = mergeStats(ms)
	}
	for w, ms := range group(each(runs, func(r *Results) map[int]map[string]ContStat { return r.Contention })) {
		out.Contention[w] = map[string]ContStat{}
		for lib, cs := range group(ms) {
			out.Contention[w][lib] = ContStat{
				Acquisitions: int(median(cs, func(c ContStat) float64 { return float64(c.Acquisitions) })),
				Utilization:  median(cs, func(c ContStat) float64 { return c.Utilization }),
				WaitP50us:    median(cs, func(c ContStat) float64 { return c.WaitP50us }),
				WaitP99us:    median(cs, func(c ContStat) float64 { return c.WaitP99us }),
				WaitMaxUs:    median(cs, func(c ContStat) float64 { return c.WaitMaxUs }),
				Fairness:     median(cs, func(c ContStat) float64 { return c.Fairness }),
				MinMax:       median(cs, func(c ContStat) float64 { return c.MinMax }),
				Handoff:      mergeHandoff(each(cs, func(c ContStat) *HandoffStat { return c.Handoff })),
			}
			for _, c := range cs {
				out.Contention[w][lib] = addErrors(out.Contention[w][lib], c.Errors)
			}
		}
	}
	for lib, ps := range group(each(runs, func(r *Results) map[string]ProcStat { return r.Processes })) {
		out.Processes[lib] = mergeProcs(ps)
	}
	for n, ms := range group(each(runs, func(r *Results) map[int]map[string]WatchStat { return r.Watchdog })) {
		out.Watchdog[n] = map[string]WatchStat{}
		for lib, ws := range group(ms) {
			out.Watchdog[n][lib] = mergeWatch(ws)
		}
	}
	if ts := each(runs, func(r *Results) map[string]Stat { return r.TypesUncontended }); len(group(ts)) > 0 {
		out.TypesUncontended = mergeStats(ts)
	}
	for k, ms := range group(each(runs, func(r *Results) map[string]MixStat { return r.ReadMostly })) {
		if out.ReadMostly == nil {
			out.ReadMostly = map[string]MixStat{}
		}
		out.ReadMostly[k] = mergeMix(ms)
	}
	out.Durable, out.DurableSkipped = mergeDurable(runs), runs[0].DurableSkipped
	for _, r := range runs {
		for k, v := range r.Seconds {
			out.Seconds[k] += v
		}
	}
	for lib, as := range group(each(runs, func(r *Results) map[string]AllocStat { return r.Allocs })) {
		out.Allocs[lib] = AllocStat{
			AllocsPerCycle: int64(median(as, func(a AllocStat) float64 { return float64(a.AllocsPerCycle) })),
			BytesPerCycle:  int64(median(as, func(a AllocStat) float64 { return float64(a.BytesPerCycle) })),
		}
	}
	return out
}

// each returns f of every x.
func each[X, T any](xs []X, f func(X) T) []T {
	out := make([]T, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

func addErrors(c ContStat, n int) ContStat { c.Errors += n; return c }

// mergeHandoff is the median of every hand-off counter; nil if the runs
// have none.
func mergeHandoff(hs []*HandoffStat) *HandoffStat {
	var in []*HandoffStat
	for _, h := range hs {
		if h != nil {
			in = append(in, h)
		}
	}
	if len(in) == 0 {
		return nil
	}
	return &HandoffStat{
		Passed:      median(in, func(h *HandoffStat) float64 { return h.Passed }),
		PassedShare: median(in, func(h *HandoffStat) float64 { return h.PassedShare }),
		Notified:    median(in, func(h *HandoffStat) float64 { return h.Notified }),
		Local:       median(in, func(h *HandoffStat) float64 { return h.Local }),
		Promoted:    median(in, func(h *HandoffStat) float64 { return h.Promoted }),
		Timer:       median(in, func(h *HandoffStat) float64 { return h.Timer }),
	}
}

// group collects, per key, the values the maps hold under it.
func group[K comparable, V any](ms []map[K]V) map[K][]V {
	out := map[K][]V{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = append(out[k], v)
		}
	}
	return out
}

// mergeStats merges one section's per-library stats over the runs.
func mergeStats(ms []map[string]Stat) map[string]Stat {
	out := map[string]Stat{}
	for lib, ss := range group(ms) {
		out[lib] = mergeStat(ss)
	}
	return out
}

func mergeStat(ss []Stat) Stat {
	out := Stat{
		P50us:        median(ss, func(s Stat) float64 { return s.P50us }),
		P99us:        median(ss, func(s Stat) float64 { return s.P99us }),
		MaxUs:        median(ss, func(s Stat) float64 { return s.MaxUs }),
		CyclesPerSec: median(ss, func(s Stat) float64 { return s.CyclesPerSec }),
	}
	for _, s := range ss {
		out.Cycles += s.Cycles
		out.Errors += s.Errors
	}
	return out
}

// median of f over xs (the mean of the two middle values for an even
// count); 0 for none.
func median[T any](xs []T, f func(T) float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func withNodes(n int, fn func([]*node, []string) error) error {
	nodes, err := startNodes(n) // benchCmd checked PATH
	if err != nil {
		return err
	}
	return runOn(nodes, fn)
}

// withNodesOf is withNodes with n processes of server bin and its extra
// arguments.
func withNodesOf(bin string, extra []string, n int, fn func([]*node, []string) error) error {
	nodes, err := startNodesOf(bin, extra, n)
	if err != nil {
		return err
	}
	return runOn(nodes, fn)
}

// runOn runs fn on nodes, and stops them.
func runOn(nodes []*node, fn func([]*node, []string) error) error {
	defer func() {
		for _, x := range nodes {
			x.Close()
		}
	}()
	return fn(nodes, urlsOf(nodes))
}

func slowScenarios(cfg benchCfg, nodes []*node, urls []string, res *Results, p *progress) error {
	proxy, err := newDelayProxy(nodes[4].Addr())
	if err != nil {
		return err
	}
	defer proxy.Close()
	purls := append(append([]string(nil), urls[:4]...), "redis://"+proxy.Addr())
	cs, err := newContenders(purls)
	if err != nil {
		return err
	}
	defer closeContenders(cs)
	if res.SlowNode["first-healthy"], err = firstLocks(purls, firstClients); err != nil {
		return err
	}
	for _, d := range []struct {
		name  string
		delay time.Duration
	}{{"healthy", 0}, {"+2ms", 2 * time.Millisecond}, {"+20ms", 20 * time.Millisecond}, {"+200ms", 200 * time.Millisecond}} {
		p.step("one of five nodes " + d.name)
		proxy.SetDelay(d.delay)
		res.SlowNode[d.name] = uncontended(cs, cfg.iters, cfg.block, capFor(cfg, d.name))
	}
	proxy.SetDelay(0)
	p.step("one of five nodes frozen (SIGSTOP)")
	if err := nodes[4].Fault(); err != nil {
		return err
	}
	res.SlowNode["frozen"] = uncontended(cs, cfg.iters, cfg.block, capFor(cfg, "frozen"))
	if res.SlowNode["first-frozen"], err = firstLocks(purls, firstClients); err != nil {
		return err
	}
	return nodes[4].Heal()
}

// firstClients is how many fresh Clients firstLocks times.
const firstClients = 5

// firstLocks makes n fresh Clients of urls, one after another, and times
// the first TryLock+Release of each: the first contact with the nodes
// (their identities) included, so that a slow or frozen node's share of it
// shows.
func firstLocks(urls []string, n int) (map[string]Stat, error) {
	var lat []time.Duration
	var spent time.Duration
	errs := 0
	for i := 0; i < n; i++ {
		o, err := newOurs(urls)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		unlock, err := o.try(context.Background(), fmt.Sprintf("bench:first:%d", i))
		if err == nil {
			err = unlock()
		}
		d := time.Since(start)
		spent += d
		o.close()
		if err != nil {
			errs++
			continue
		}
		lat = append(lat, d)
	}
	s := Stat{Cycles: len(lat), Errors: errs}
	if len(lat) > 0 {
		s.P50us, s.P99us, s.MaxUs = us(quantile(lat, 0.5)), us(quantile(lat, 0.99)), us(quantile(lat, 1))
		s.CyclesPerSec = float64(n) / spent.Seconds()
	}
	return map[string]Stat{"redlock": s}, nil
}

// capFor limits go-redsync's cycles where each takes hundreds of ms or
// seconds; the others run the full count.
func capFor(cfg benchCfg, scenario string) map[string]int {
	if n, ok := cfg.slowIters[scenario]; ok {
		return map[string]int{"redsync": n}
	}
	return nil
}

// uncontended interleaves the contenders in blocks of cycles on distinct
// keys, so that machine noise hits all alike.
func uncontended(cs []contender, iters, block int, caps map[string]int) map[string]Stat {
	lat := map[string][]time.Duration{}
	errs := map[string]int{}
	spent := map[string]time.Duration{}
	ctx := context.Background()
	for done := 0; done < iters; done += block {
		for k := range cs {
			c := cs[(k+done/block)%len(cs)]
			limit := iters
			if n, ok := caps[c.name()]; ok {
				limit = n
			}
			for i := 0; i < block && len(lat[c.name()])+errs[c.name()] < limit; i++ {
				key := fmt.Sprintf("bench:%s:%d", c.name(), done+i)
				start := time.Now()
				unlock, err := c.try(ctx, key)
				if err == nil {
					err = unlock()
				}
				d := time.Since(start)
				spent[c.name()] += d
				if err != nil {
					errs[c.name()]++
					continue
				}
				lat[c.name()] = append(lat[c.name()], d)
			}
		}
	}
	out := map[string]Stat{}
	for _, c := range cs {
		l := lat[c.name()]
		s := Stat{Cycles: len(l), Errors: errs[c.name()]}
		if len(l) > 0 {
			s.P50us, s.P99us, s.MaxUs = us(quantile(l, 0.5)), us(quantile(l, 0.99)), us(quantile(l, 1))
			s.CyclesPerSec = float64(len(l)+s.Errors) / spent[c.name()].Seconds()
		}
		out[c.name()] = s
	}
	return out
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// contention: workers fight for one key, holding it 1ms each time.
func contention(c contender, workers int, dur time.Duration) ContStat {
	var before observe.HandoffStats
	h, isH := c.(handoffer)
	if isH {
		before = h.handoffStats()
	}
	r := hammer(c, "hot:"+c.name()+fmt.Sprint(workers), workers, dur, time.Millisecond)
	s := ContStat{Acquisitions: len(r.waits), Utilization: float64(r.busy) / float64(r.end.Sub(r.start)),
		Fairness: jain(r.counts), MinMax: minMax(r.counts), Errors: r.errs}
	if len(r.waits) > 0 {
		s.WaitP50us, s.WaitP99us, s.WaitMaxUs = us(quantile(r.waits, 0.5)), us(quantile(r.waits, 0.99)), us(quantile(r.waits, 1))
	}
	if isH {
		s.Handoff = handoffDelta(before, h.handoffStats(), s.Acquisitions)
	}
	return s
}

// hammered is what hammer measured.
type hammered struct {
	counts     []int           // acquisitions per worker
	busy       time.Duration   // time spent holding the lock, all workers
	waits      []time.Duration // of every acquisition
	errs       int             // Lock calls that failed before the end
	start, end time.Time       // of the run: from the workers' start to the last one's return
}

// hammer runs workers that take key, hold it for hold and release it, over
// and over, for dur.
func hammer(c contender, key string, workers int, dur, hold time.Duration) hammered {
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var busy atomic.Int64
	var mu sync.Mutex
	r := hammered{counts: make([]int, workers)}
	var wg sync.WaitGroup
	r.start = time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				unlock, err := c.lock(ctx, key)
				if err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						r.errs++
						mu.Unlock()
					}
					continue
				}
				wait := time.Since(t0)
				in := time.Now()
				time.Sleep(hold)
				busy.Add(int64(time.Since(in)))
				_ = unlock()
				mu.Lock()
				r.waits = append(r.waits, wait)
				r.counts[w]++
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	r.end = time.Now()
	r.busy = time.Duration(busy.Load())
	return r
}

// minMax is the fewest of x over the most; 0 for none.
func minMax(x []int) float64 {
	if len(x) == 0 {
		return 0
	}
	lo, hi := slices.Min(x), slices.Max(x)
	if hi == 0 {
		return 0
	}
	return float64(lo) / float64(hi)
}

func jain(x []int) float64 {
	var sum, sq float64
	for _, v := range x {
		sum += float64(v)
		sq += float64(v) * float64(v)
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(x)) * sq)
}

func independent(c contender, g int, dur time.Duration) Stat {
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var n, errs atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			key := fmt.Sprintf("ind:%s:%d", c.name(), i)
			for ctx.Err() == nil {
				unlock, err := c.try(ctx, key)
				if err == nil {
					err = unlock()
				}
				if err != nil {
					errs.Add(1)
					continue
				}
				n.Add(1)
			}
		}(i)
	}
	wg.Wait()
	return Stat{Cycles: int(n.Load()), Errors: int(errs.Load()), CyclesPerSec: float64(n.Load()) / time.Since(start).Seconds()}
}

func allocs(c contender) AllocStat {
	ctx := context.Background()
	r := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			unlock, err := c.try(ctx, "alloc:"+c.name())
			if err == nil {
				_ = unlock()
			}
		}
	})
	return AllocStat{AllocsPerCycle: r.AllocsPerOp(), BytesPerCycle: r.AllocedBytesPerOp()}
}

func ratio(a, b float64) string {
	if b == 0 || math.IsNaN(a/b) {
		return "-"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// posRatio is ratio for figures that are noise unless positive.
func posRatio(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "-"
	}
	return ratio(a, b)
}

func goals(r *Results) []Goal {
	var g []Goal
	if s, ok := r.Uncontended[5]; ok {
		g = append(g, Goal{"healthy acquire+release p50 (5 nodes) no worse than go-redsync",
			fmt.Sprintf("%.0fµs vs %.0fµs", s["redlock"].P50us, s["redsync"].P50us), s["redlock"].P50us <= s["redsync"].P50us})
	}
	if len(r.SlowNode) > 0 {
		h := r.SlowNode["healthy"]["redlock"].P99us
		for _, k := range []string{"frozen", "+200ms"} {
			p := r.SlowNode[k]["redlock"].P99us
			g = append(g, Goal{"one of five " + k + ": p99 within 2x of the healthy p99",
				fmt.Sprintf("%.0fµs vs healthy %.0fµs (go-redsync %.0fµs)", p, h, r.SlowNode[k]["redsync"].P99us), p <= 2*h})
		}
		if f, ok := r.SlowNode["first-frozen"]["redlock"]; ok && f.Cycles > 0 {
			g = append(g, Goal{"first Lock after New with one of five frozen: within 2x of the healthy p99",
				fmt.Sprintf("max %.0fµs vs healthy p99 %.0fµs", f.MaxUs, h), f.MaxUs <= 2*h})
		}
	}
	for _, t := range []struct {
		workers      int
		util, minMax float64
		p99, max     float64 // ms
	}{{8, 0.90, 0.8, 25, 100}, {64, 0.90, 0.6, 300, 600}} {
		c, ok := r.Contention[t.workers]
		if !ok {
			continue
		}
		o, s := c["redlock"], c["redsync"]
		hot := fmt.Sprintf("hot key, %d workers: ", t.workers)
		g = append(g,
			Goal{hot + fmt.Sprintf("utilization >= %.0f%%", 100*t.util),
				fmt.Sprintf("%.0f%% (go-redsync %.0f%%)", 100*o.Utilization, 100*s.Utilization), o.Utilization >= t.util},
			Goal{hot + fmt.Sprintf("wait p99 <= %.0f ms", t.p99),
				fmt.Sprintf("%.1f ms (go-redsync %.1f ms)", o.WaitP99us/1000, s.WaitP99us/1000), o.WaitP99us <= t.p99*1000},
			Goal{hot + fmt.Sprintf("wait max <= %.0f ms", t.max),
				fmt.Sprintf("%.1f ms (go-redsync %.1f ms)", o.WaitMaxUs/1000, s.WaitMaxUs/1000), o.WaitMaxUs <= t.max*1000},
			Goal{hot + fmt.Sprintf("min:max acquisitions per worker >= %.1f", t.minMax),
				fmt.Sprintf("%.2f (go-redsync %.2f)", o.MinMax, s.MinMax), o.MinMax >= t.minMax})
	}
	if p, ok := r.Processes["redlock"]; ok {
		s := r.Processes["redsync"]
		hot := fmt.Sprintf("hot key, %d processes x %d workers: ", p.Processes, p.Workers)
		g = append(g,
			Goal{hot + "utilization >= 90%", fmt.Sprintf("%.0f%% (go-redsync %.0f%%)", 100*p.Utilization, 100*s.Utilization), p.Utilization >= 0.9},
			Goal{hot + "wait p99 <= 50 ms", fmt.Sprintf("%.1f ms (go-redsync %.1f ms)", p.WaitP99us/1000, s.WaitP99us/1000), p.WaitP99us <= 50000},
			Goal{hot + "no process starved (min:max acquisitions per process >= 0.85)",
				fmt.Sprintf("%.2f, %s (go-redsync %.2f, %s)", p.ProcMinMax, joinInts(p.PerProcess), s.ProcMinMax, joinInts(s.PerProcess)),
				p.ProcMinMax >= 0.85})
	}
	if f, ok := r.Processes["redlock-fair"]; ok {
		hot := fmt.Sprintf("hot key, %d processes x %d workers, Fair(): ", f.Processes, f.Workers)
		g = append(g,
			Goal{hot + "min:max acquisitions per process >= 0.95", fmt.Sprintf("%.2f, %s", f.ProcMinMax, joinInts(f.PerProcess)), f.ProcMinMax >= 0.95},
			Goal{hot + "min:max acquisitions per worker >= 0.9", fmt.Sprintf("%.2f", f.WorkerMinMax), f.WorkerMinMax >= 0.9})
	}
	g = append(g, scaleGoals(r)...)
	return append(g, typesGoals(r)...)
}

// scaleGoals are the scale goals, each against go-redsync
// in the same run.
func scaleGoals(r *Results) []Goal {
	var g []Goal
	for _, t := range []struct {
		nodes int
		most  float64
	}{{5, 0.6}, {1, 1.0}} {
		if s, ok := r.Uncontended[t.nodes]; ok {
			o, rs := s["redlock"].P50us, s["redsync"].P50us
			g = append(g, Goal{fmt.Sprintf("acquire+release p50, one caller, %d node(s): <= %.1f x go-redsync", t.nodes, t.most),
				fmt.Sprintf("%.0fµs vs %.0fµs (%s)", o, rs, ratio(o, rs)), o <= t.most*rs})
		}
	}
	if len(r.Independent) > 0 {
		o, rs := r.Independent["redlock"].CyclesPerSec, r.Independent["redsync"].CyclesPerSec
		g = append(g, Goal{"independent keys, 64 goroutines: >= 3 x go-redsync's cycles/s",
			fmt.Sprintf("%.0f vs %.0f (%s)", o, rs, ratio(o, rs)), o >= 3*rs})
	}
	if len(r.Allocs) > 0 {
		o, rs := r.Allocs["redlock"], r.Allocs["redsync"]
		g = append(g, Goal{"allocations per acquire+release, 5 nodes: <= 40 and <= 2,500 B",
			fmt.Sprintf("%d / %d B (go-redsync %d / %d B)", o.AllocsPerCycle, o.BytesPerCycle, rs.AllocsPerCycle, rs.BytesPerCycle),
			o.AllocsPerCycle <= 40 && o.BytesPerCycle <= 2500})
	}
	n := 0
	for k := range r.Watchdog {
		n = max(n, k)
	}
	if w, ok := r.Watchdog[n]; ok {
		o, rs := w["redlock"], w["redsync"]
		g = append(g,
			Goal{fmt.Sprintf("heap per held lock (%d held) <= go-redsync's", n),
				fmt.Sprintf("%.0f B vs %.0f B", o.HeapPerLock, rs.HeapPerLock), o.HeapPerLock <= rs.HeapPerLock},
			Goal{fmt.Sprintf("renewal CPU per interval, %d locks: <= 0.1 x go-redsync", n),
				fmt.Sprintf("%.0f ms vs %.0f ms (%s)", o.CPUms, rs.CPUms, ratio(o.CPUms, rs.CPUms)), o.CPUms <= 0.1*rs.CPUms})
	}
	return g
}

func markdown(r *Results) string {
	var b strings.Builder
	how := "one run"
	if r.Repeat > 1 {
		how = fmt.Sprintf("median of %d runs; cycle and error counts are totals", r.Repeat)
	}
	fmt.Fprintf(&b, "## redlock vs go-redsync v4.18.1 (%s, %s%s; %s)\n\n", r.Date, r.Machine, map[bool]string{true: ", quick", false: ""}[r.Quick], how)
	b.WriteString("Ratio = redlock / go-redsync (below 1 is better for latency, above 1 for throughput). single-node = one plain SET NX lock, the floor. errors = cycles that did not acquire (timeouts under load), per library.\n\n")
	if hasAlt(r) {
		b.WriteString(guarantees)
	}
	if len(r.Uncontended) > 0 {
		b.WriteString("### Uncontended acquire+release\n\n| nodes | redlock p50 | redsync p50 | ratio | redlock p99 | redsync p99 | ratio | redlock cycles/s | redsync cycles/s | ratio | single-node p50 | " + altHeads("p50") + "errors (ours/theirs) |\n|---|---|---|---|---|---|---|---|---|---|---|" + altSeps() + "---|\n")
		var ns []int
		for n := range r.Uncontended {
			ns = append(ns, n)
		}
		sort.Ints(ns)
		for _, n := range ns {
			o, s, f := r.Uncontended[n]["redlock"], r.Uncontended[n]["redsync"], r.Uncontended[n]["single-node"]
			fmt.Fprintf(&b, "| %d | %.0fµs | %.0fµs | %s | %.0fµs | %.0fµs | %s | %.0f | %.0f | %s | %.0fµs | %s%d/%d |\n", n,
				o.P50us, s.P50us, ratio(o.P50us, s.P50us), o.P99us, s.P99us, ratio(o.P99us, s.P99us),
				o.CyclesPerSec, s.CyclesPerSec, ratio(o.CyclesPerSec, s.CyclesPerSec), f.P50us,
				altCells(r.Uncontended[n], func(x Stat) string { return fmt.Sprintf("%.0fµs", x.P50us) }), o.Errors, s.Errors)
		}
	}
	if len(r.Uncontended) > 0 {
		b.WriteString(fencingTable(r))
	}
	if len(r.SlowNode) > 0 {
		b.WriteString("\n### One of five nodes slow or frozen (acquire+release)\n\n| node 5 | redlock p50 | redsync p50 | ratio | redlock p99 | redsync p99 | ratio | redlock cycles | redsync cycles | errors (ours/theirs) |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, k := range []string{"healthy", "+2ms", "+20ms", "+200ms", "frozen"} {
			o, s := r.SlowNode[k]["redlock"], r.SlowNode[k]["redsync"]
			fmt.Fprintf(&b, "| %s | %.0fµs | %.0fµs | %s | %.0fµs | %.0fµs | %s | %d | %d | %d/%d |\n", k,
				o.P50us, s.P50us, ratio(o.P50us, s.P50us), o.P99us, s.P99us, ratio(o.P99us, s.P99us), o.Cycles, s.Cycles, o.Errors, s.Errors)
		}
		if h, f := r.SlowNode["first-healthy"]["redlock"], r.SlowNode["first-frozen"]["redlock"]; h.Cycles+f.Cycles > 0 {
			fmt.Fprintf(&b, "\nFirst TryLock+Release of a new Client (first contact with the nodes included; %d Clients each): all nodes healthy p50 %.0fµs, max %.0fµs; one of five frozen p50 %.0fµs, max %.0fµs.\n",
				firstClients, h.P50us, h.MaxUs, f.P50us, f.MaxUs)
		}
	}
	if len(r.Contention) > 0 {
		b.WriteString("\n### Hot key, 5 nodes, 1 ms critical section\n\n| workers | lib | acquisitions | utilization | wait p50 | wait p99 | wait max | fairness (Jain) | min:max per worker | passed without a round trip | waits ended by notification / local release / previous waiter left / timer | errors |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, w := range []int{8, 64} {
			for _, lib := range append([]string{"redlock", "redsync", "single-node"}, altLibs...) {
				c, ok := r.Contention[w][lib]
				if !ok && slices.Contains(altLibs, lib) {
					continue
				}
				fmt.Fprintf(&b, "| %d | %s | %d | %.0f%% | %.1fms | %.1fms | %.1fms | %.2f | %.2f | %s | %s | %d |\n", w, label(lib), c.Acquisitions, 100*c.Utilization,
					c.WaitP50us/1000, c.WaitP99us/1000, c.WaitMaxUs/1000, c.Fairness, c.MinMax, passedCell(c.Handoff), wakesCell(c.Handoff), c.Errors)
			}
			o, s := r.Contention[w]["redlock"], r.Contention[w]["redsync"]
			fmt.Fprintf(&b, "| %d | ratio | %s | %s | %s | %s | %s | %s | %s | | | |\n", w, ratio(float64(o.Acquisitions), float64(s.Acquisitions)),
				ratio(o.Utilization, s.Utilization), ratio(o.WaitP50us, s.WaitP50us), ratio(o.WaitP99us, s.WaitP99us), ratio(o.WaitMaxUs, s.WaitMaxUs),
				ratio(o.Fairness, s.Fairness), ratio(o.MinMax, s.MinMax))
		}
	}
	if len(r.Processes) > 0 {
		o, s := r.Processes["redlock"], r.Processes["redsync"]
		fmt.Fprintf(&b, "\n### Hot key across processes: %d processes x %d workers, one key, 5 nodes, 1 ms critical section\n\n", o.Processes, o.Workers)
		b.WriteString("| lib | acquisitions | per process | utilization | wait p50 | wait p99 | wait max | min:max per process | min:max per worker | fairness (Jain) | passed without a round trip | waits ended by notification / local release / previous waiter left / timer | errors |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, lib := range procTableLibs(r.Processes) {
			p, ok := r.Processes[lib]
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %.0f%% | %.1fms | %.1fms | %.1fms | %.2f | %.2f | %.2f | %s | %s | %d |\n", lib, p.Acquisitions, joinInts(p.PerProcess),
				100*p.Utilization, p.WaitP50us/1000, p.WaitP99us/1000, p.WaitMaxUs/1000, p.ProcMinMax, p.WorkerMinMax, p.Fairness,
				passedCell(p.Handoff), wakesCell(p.Handoff), p.Errors)
		}
		fmt.Fprintf(&b, "| ratio | %s | | %s | %s | %s | %s | %s | %s | %s | | | |\n", ratio(float64(o.Acquisitions), float64(s.Acquisitions)),
			ratio(o.Utilization, s.Utilization), ratio(o.WaitP50us, s.WaitP50us), ratio(o.WaitP99us, s.WaitP99us), ratio(o.WaitMaxUs, s.WaitMaxUs),
			ratio(o.ProcMinMax, s.ProcMinMax), ratio(o.WorkerMinMax, s.WorkerMinMax), ratio(o.Fairness, s.Fairness))
	}
	if len(r.Independent) > 0 {
		o, s, f := r.Independent["redlock"], r.Independent["redsync"], r.Independent["single-node"]
		fmt.Fprintf(&b, "\n### Independent keys, 64 goroutines, 5 nodes\n\n| redlock cycles/s | redsync cycles/s | ratio | single-node cycles/s | %serrors (ours/theirs) |\n|---|---|---|---|%s---|\n| %.0f | %.0f | %s | %.0f | %s%d/%d |\n",
			altHeads("cycles/s"), altSeps(), o.CyclesPerSec, s.CyclesPerSec, ratio(o.CyclesPerSec, s.CyclesPerSec), f.CyclesPerSec,
			altCells(r.Independent, cyclesCell), o.Errors, s.Errors)
		if co, ok := r.Independent["redlock-no-coalescing"]; ok {
			fmt.Fprintf(&b, "\nWith `WithoutCoalescing()` (on by default): %.0f cycles/s, %s x go-redsync; the default is %s x this; errors %d.\n",
				co.CyclesPerSec, ratio(co.CyclesPerSec, s.CyclesPerSec), ratio(o.CyclesPerSec, co.CyclesPerSec), co.Errors)
		}

	}
	if len(r.Scaling) > 0 {
		b.WriteString(scalingTable(r))
	}
	if len(r.Allocs) > 0 {
		ao, as, af := r.Allocs["redlock"], r.Allocs["redsync"], r.Allocs["single-node"]
		fmt.Fprintf(&b, "\n### Allocations per acquire+release, 5 nodes\n\n| | redlock | redsync | ratio | single-node | %s\n|---|---|---|---|---|%s\n| allocs | %d | %d | %s | %d | %s\n| bytes | %d | %d | %s | %d | %s\n",
			strings.TrimSpace(altHeads("")), altSeps(), ao.AllocsPerCycle, as.AllocsPerCycle, ratio(float64(ao.AllocsPerCycle), float64(as.AllocsPerCycle)), af.AllocsPerCycle,
			strings.TrimSpace(altCells(r.Allocs, func(a AllocStat) string { return fmt.Sprint(a.AllocsPerCycle) })),
			ao.BytesPerCycle, as.BytesPerCycle, ratio(float64(ao.BytesPerCycle), float64(as.BytesPerCycle)), af.BytesPerCycle,
			strings.TrimSpace(altCells(r.Allocs, func(a AllocStat) string { return fmt.Sprint(a.BytesPerCycle) })))

	}
	if len(r.Watchdog) > 0 {
		var ns []int
		var w0 WatchStat
		for n, m := range r.Watchdog {
			ns = append(ns, n)
			w0 = m["redlock"]
		}
		sort.Ints(ns)
		fmt.Fprintf(&b, "\n### Cost of held locks: watchdog (ours) vs one goroutine per lock calling Extend (go-redsync), 5 nodes, lease %v renewed every %v\n\n",
			time.Duration(w0.LeaseMs)*time.Millisecond, time.Duration(w0.EveryMs)*time.Millisecond)
		b.WriteString("Per renewal interval, measured over a window of whole intervals while the locks are held. Script calls: ours renew every lock of a Client in one batch per tick, sent as one pipeline (one round trip) per node with one script call per 256 locks; go-redsync sends one call per lock. CPU: this process, above its idle rate (in brackets); ~0 where the difference is below the noise. Memory per lock: growth from before the locks were taken (heap after GC; goroutine stacks); ~0 where it shrank (noise, at 10 locks). renewals failed: during the whole hold.\n\n")
		b.WriteString("| locks | lib | script calls / interval (busiest node) | renewals / interval | CPU / interval (idle) | CPU per renewal | goroutines idle (peak) | heap per lock | stacks per lock | acquire all | renewals failed / locks lost |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, n := range ns {
			for _, lib := range []string{"redlock", "redsync"} {
				w := r.Watchdog[n][lib]
				fmt.Fprintf(&b, "| %d | %s | %.0f | %.0f | %s | %s | %d (%d) | %s | %s | %s | %d/%d |\n", n, lib, w.RoundTrips, w.Renewals, cpuCell(w),
					perRenewal(w), w.GoroutinesIdle, w.GoroutinesPeak, bytesCell(w.HeapPerLock), bytesCell(w.StackPerLock), acquireCell(w), w.RenewFailed, w.Lost)
			}
			o, s := r.Watchdog[n]["redlock"], r.Watchdog[n]["redsync"]
			fmt.Fprintf(&b, "| %d | ratio | %s | %s | %s | %s | %s | %s | %s | %s | |\n", n, ratio(o.RoundTrips, s.RoundTrips), ratio(o.Renewals, s.Renewals),
				posRatio(o.CPUms, s.CPUms), posRatio(cpuPerRenewal(o), cpuPerRenewal(s)), ratio(float64(o.GoroutinesIdle), float64(s.GoroutinesIdle)),
				posRatio(o.HeapPerLock, s.HeapPerLock), posRatio(o.StackPerLock, s.StackPerLock), ratio(o.AcquireMs, s.AcquireMs))
		}
	}
	if len(r.Watchdog) > 0 {
		b.WriteString("\n![script calls vs locks](watchdog_calls_vs_locks.png) ![CPU vs locks](watchdog_cpu_vs_locks.png)\n")
	}
	b.WriteString(typesTables(r))
	b.WriteString(durableTable(r))
	if len(r.Goals) > 0 {
		b.WriteString("\n### Goals\n\n| goal | figure | met |\n|---|---|---|\n")
		for _, g := range r.Goals {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", g.Goal, g.Figure, map[bool]string{true: "yes", false: "**no**"}[g.Met])
		}
	}
	if len(r.Seconds) > 0 {
		var parts []string
		for _, name := range scenarios {
			if v, ok := r.Seconds[name]; ok {
				parts = append(parts, fmt.Sprintf("%s %.0fs", name, v))
			}
		}
		fmt.Fprintf(&b, "\nTime per scenario (all runs): %s.\n", strings.Join(parts, ", "))
	}
	return b.String()
}

// passedCell is the acquisitions passed on with no round trip, and their
// share; "-" for libraries without hand-off.
func passedCell(h *HandoffStat) string {
	if h == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f (%.0f%%)", h.Passed, 100*h.PassedShare)
}

// wakesCell is how the waits ended: by the nodes' notification, by a
// release in the same process, by the previous waiter leaving (the next
// one tries at once), by the timer.
func wakesCell(h *HandoffStat) string {
	if h == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f / %.0f / %.0f / %.0f", h.Notified, h.Local, h.Promoted, h.Timer)
}

func perRenewal(w WatchStat) string {
	if v := cpuPerRenewal(w); v > 0 {
		return fmt.Sprintf("%.0fµs", v)
	}
	return "-"
}

// cpuPerRenewal is the CPU µs per renewal made; 0 when there is no
// figure (no renewal, or CPU within the noise).
func cpuPerRenewal(w WatchStat) float64 {
	if w.Renewals <= 0 || w.CPUms <= 0 {
		return 0
	}
	return 1000 * w.CPUms / w.Renewals
}

func cpuCell(w WatchStat) string {
	if w.CPUms <= 0 {
		return fmt.Sprintf("~0 (%.0fms)", w.IdleCPUms)
	}
	return fmt.Sprintf("%.0fms (%.0fms)", w.CPUms, w.IdleCPUms)
}

func acquireCell(w WatchStat) string {
	if w.NotAcquired > 0 {
		return fmt.Sprintf("%.2fs (%d not acquired)", w.AcquireMs/1000, w.NotAcquired)
	}
	return fmt.Sprintf("%.2fs", w.AcquireMs/1000)
}

func bytesCell(v float64) string {
	if v <= 0 {
		return "~0"
	}
	return fmt.Sprintf("%.0f B", v)
}

func joinInts(x []int) string {
	s := make([]string, len(x))
	for i, v := range x {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, "/")
}

// progress draws a bar on stderr.
type progress struct {
	w     io.Writer
	n     int
	total int
	run   string
	start time.Time
}

func (p *progress) step(label string) {
	if p.start.IsZero() {
		p.start = time.Now()
	}
	p.n++
	const width = 30
	fill := width * (p.n - 1) / p.total
	fmt.Fprintf(p.w, "\r[%s%s] %3d/%d %-9s %-36s %5.0fs", strings.Repeat("#", fill), strings.Repeat(".", width-fill), p.n, p.total, p.run, label, time.Since(p.start).Seconds())
}

func (p *progress) done() {
	fmt.Fprintf(p.w, "\r[%s] done in %.0fs%s\n", strings.Repeat("#", 30), time.Since(p.start).Seconds(), strings.Repeat(" ", 60))
}

// defaultOutDir is docs/bench at the repository root when run from
// cmd/redlock-bench (as `make bench` does), else bench-results here.
func defaultOutDir() string {
	if _, err := os.Stat("../../go.mod"); err == nil {
		if _, err := os.Stat("../../cmd/redlock-bench/go.mod"); err == nil {
			return filepath.Join("..", "..", "docs", "bench")
		}
	}
	return "bench-results"
}

// fencingTable compares uncontended acquire+release with fencing tokens
// (WithFencing) and without, same library, same nodes, same run.
func fencingTable(r *Results) string {
	var b strings.Builder
	b.WriteString("\n### Cost of fencing tokens (uncontended acquire+release, WithFencing vs without)\n\n| nodes | p50 without | p50 fenced | ratio | p99 without | p99 fenced | ratio | cycles/s without | cycles/s fenced | ratio |\n|---|---|---|---|---|---|---|---|---|---|\n")
	var ns []int
	for n := range r.Uncontended {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	for _, n := range ns {
		o, f := r.Uncontended[n]["redlock"], r.Uncontended[n]["redlock-fenced"]
		fmt.Fprintf(&b, "| %d | %.0fµs | %.0fµs | %s | %.0fµs | %.0fµs | %s | %.0f | %.0f | %s |\n", n, o.P50us, f.P50us, ratio(f.P50us, o.P50us),
			o.P99us, f.P99us, ratio(f.P99us, o.P99us), o.CyclesPerSec, f.CyclesPerSec, ratio(f.CyclesPerSec, o.CyclesPerSec))
	}
	return b.String()
}
