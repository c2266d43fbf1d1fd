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
}

// AllocStat is allocations per acquire+release cycle.
type AllocStat struct {
	AllocsPerCycle int64 `json:"allocs_per_cycle"`
	BytesPerCycle  int64 `json:"bytes_per_cycle"`
}

// Results of one bench run: with --repeat N, every figure is the median of
// the N runs (cycle and error counts are totals), and Runs keeps each run.
type Results struct {
	Date        string                      `json:"date"`
	Quick       bool                        `json:"quick"`
	Repeat      int                         `json:"repeat"`
	Machine     string                      `json:"machine"`
	Uncontended map[int]map[string]Stat     `json:"uncontended_by_nodes"`
	SlowNode    map[string]map[string]Stat  `json:"one_of_five_slow"`
	Contention  map[int]map[string]ContStat `json:"hot_key_by_workers"`
	Independent map[string]Stat             `json:"independent_keys_64"`
	Allocs      map[string]AllocStat        `json:"allocs_5_nodes"`
	Goals       []Goal                      `json:"goals,omitempty"`
	Runs        []*Results                  `json:"runs,omitempty"`
}

func newResults() *Results {
	return &Results{Uncontended: map[int]map[string]Stat{}, SlowNode: map[string]map[string]Stat{},
		Contention: map[int]map[string]ContStat{}, Independent: map[string]Stat{}, Allocs: map[string]AllocStat{}}
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
	contention  time.Duration
	independent time.Duration
	ns          []int
	repeat      int
	only        map[string]bool // scenarios to run; all when empty
}

// scenarios are the names --only accepts, in the order they run.
var scenarios = []string{"uncontended", "slow", "contention", "independent", "allocs"}

func (c benchCfg) runs(name string) bool { return len(c.only) == 0 || c.only[name] }

func cmdBench(args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "short run (about a minute) for tests and CI")
	outDir := fs.String("out", defaultOutDir(), "directory for results.json, results.md and the PNG plots (default: bench/results at the repo root)")
	repeat := fs.Int("repeat", 0, "runs of the whole benchmark; figures are medians over them (default 3, 1 with --quick)")
	only := fs.String("only", "", "comma-separated scenarios to run: "+strings.Join(scenarios, ", ")+" (default: all)")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	cfg := benchCfg{iters: 2000, block: 100, contention: 5 * time.Second, independent: 4 * time.Second, ns: []int{1, 3, 5, 7, 9},
		slowIters: map[string]int{"+2ms": 100, "+20ms": 20, "+200ms": 3, "frozen": 1}, repeat: 3}
	if *quick {
		cfg = benchCfg{iters: 200, block: 50, contention: 1500 * time.Millisecond, independent: time.Second, ns: []int{1, 3, 5},
			slowIters: map[string]int{"+2ms": 30, "+20ms": 10, "+200ms": 2, "frozen": 1}, repeat: 1}
	}
	if *repeat < 0 {
		return usageErr("--repeat %d: must be at least 1", *repeat)
	} else if *repeat > 0 {
		cfg.repeat = *repeat
	}
	if *only != "" {
		cfg.only = map[string]bool{}
		for _, name := range splitURLs(*only) {
			if !slices.Contains(scenarios, name) {
				return usageErr("--only: unknown scenario %q (have %s)", name, strings.Join(scenarios, ", "))
			}
			cfg.only[name] = true
		}
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return errors.New("bench needs redis-server on PATH (apt-get install -y redis-server)")
	}
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return err
	}
	steps := 0
	for _, name := range scenarios {
		if cfg.runs(name) {
			steps += map[string]int{"uncontended": len(cfg.ns), "slow": 5, "contention": 2, "independent": 1, "allocs": 1}[name]
		}
	}
	p := &progress{w: errOut, total: steps * cfg.repeat}
	var runs []*Results
	for r := 0; r < cfg.repeat; r++ {
		p.run = fmt.Sprintf("run %d/%d", r+1, cfg.repeat)
		res, err := benchOnce(cfg, p)
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
	if err := os.WriteFile(filepath.Join(*outDir, "results.md"), []byte(md), 0o644); err != nil {
		return err
	}
	js, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(filepath.Join(*outDir, "results.json"), js, 0o644); err != nil {
		return err
	}
	pngs, err := plots(res, *outDir)
	if err != nil {
		return fmt.Errorf("plots: %w", err)
	}
	fmt.Fprintf(out, "\nwrote %s/{%s}\n", *outDir, strings.Join(append([]string{"results.md", "results.json"}, pngs...), ","))
	return nil
}

// benchOnce runs every selected scenario once, each on fresh nodes.
func benchOnce(cfg benchCfg, p *progress) (*Results, error) {
	res := newResults()
	if cfg.runs("uncontended") {
		for _, n := range cfg.ns {
			p.step(fmt.Sprintf("uncontended, %d nodes", n))
			if err := withNodes(n, func(nodes []localNode, urls []string) error {
				cs, err := newContenders(urls)
				if err != nil {
					return err
				}
				defer closeContenders(cs)
				res.Uncontended[n] = uncontended(cs, cfg.iters, cfg.block, nil)
				return nil
			}); err != nil {
				return nil, err
			}
		}
	}
	if cfg.runs("slow") {
		if err := withNodes(5, func(nodes []localNode, urls []string) error {
			return slowScenarios(cfg, nodes, urls, res, p)
		}); err != nil {
			return nil, err
		}
	}
	if !cfg.runs("contention") && !cfg.runs("independent") && !cfg.runs("allocs") {
		return res, nil
	}
	err := withNodes(5, func(nodes []localNode, urls []string) error {
		cs, err := newContenders(urls)
		if err != nil {
			return err
		}
		defer closeContenders(cs)
		if cfg.runs("contention") {
			for _, w := range []int{8, 64} {
				p.step(fmt.Sprintf("hot key, %d workers", w))
				res.Contention[w] = map[string]ContStat{}
				for _, c := range cs {
					res.Contention[w][c.name()] = contention(c, w, cfg.contention)
				}
			}
		}
		if cfg.runs("independent") {
			p.step("independent keys, 64 goroutines")
			for _, c := range cs {
				res.Independent[c.name()] = independent(c, 64, cfg.independent)
			}
		}
		if cfg.runs("allocs") {
			p.step("allocations per cycle")
			testing.Init()
			for _, c := range cs {
				res.Allocs[c.name()] = allocs(c)
			}
		}
		return nil
	})
	return res, err
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
			}
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

// each returns f of every run.
func each[T any](runs []*Results, f func(*Results) T) []T {
	out := make([]T, len(runs))
	for i, r := range runs {
		out[i] = f(r)
	}
	return out
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

func withNodes(n int, fn func([]localNode, []string) error) error {
	nodes, _, err := startNodes(n, false) // redis-server processes: cmdBench checked PATH
	if err != nil {
		return err
	}
	defer func() {
		for _, x := range nodes {
			x.Close()
		}
	}()
	return fn(nodes, urlsOf(nodes))
}

func slowScenarios(cfg benchCfg, nodes []localNode, urls []string, res *Results, p *progress) error {
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
	return nodes[4].Heal()
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
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	key := "hot:" + c.name() + fmt.Sprint(workers)
	var busy atomic.Int64
	var mu sync.Mutex
	var waits []time.Duration
	counts := make([]int, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for ctx.Err() == nil {
				t0 := time.Now()
				unlock, err := c.lock(ctx, key)
				if err != nil {
					continue
				}
				wait := time.Since(t0)
				in := time.Now()
				time.Sleep(time.Millisecond)
				busy.Add(int64(time.Since(in)))
				_ = unlock()
				mu.Lock()
				waits = append(waits, wait)
				counts[w]++
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	el := time.Since(start)
	s := ContStat{Acquisitions: len(waits), Utilization: float64(busy.Load()) / float64(el), Fairness: jain(counts)}
	if len(waits) > 0 {
		s.WaitP50us, s.WaitP99us, s.WaitMaxUs = us(quantile(waits, 0.5)), us(quantile(waits, 0.99)), us(quantile(waits, 1))
	}
	return s
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
	}
	if len(r.Independent) > 0 {
		g = append(g, Goal{"independent keys cycles/s at least go-redsync's",
			fmt.Sprintf("%.0f vs %.0f", r.Independent["redlock"].CyclesPerSec, r.Independent["redsync"].CyclesPerSec),
			r.Independent["redlock"].CyclesPerSec >= r.Independent["redsync"].CyclesPerSec})
	}
	if len(r.Allocs) > 0 {
		g = append(g, Goal{"fewer allocations per cycle than go-redsync",
			fmt.Sprintf("%d vs %d", r.Allocs["redlock"].AllocsPerCycle, r.Allocs["redsync"].AllocsPerCycle),
			r.Allocs["redlock"].AllocsPerCycle < r.Allocs["redsync"].AllocsPerCycle})
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
	if len(r.Uncontended) > 0 {
		b.WriteString("### Uncontended acquire+release\n\n| nodes | redlock p50 | redsync p50 | ratio | redlock p99 | redsync p99 | ratio | redlock cycles/s | redsync cycles/s | ratio | single-node p50 | errors (ours/theirs) |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		var ns []int
		for n := range r.Uncontended {
			ns = append(ns, n)
		}
		sort.Ints(ns)
		for _, n := range ns {
			o, s, f := r.Uncontended[n]["redlock"], r.Uncontended[n]["redsync"], r.Uncontended[n]["single-node"]
			fmt.Fprintf(&b, "| %d | %.0fµs | %.0fµs | %s | %.0fµs | %.0fµs | %s | %.0f | %.0f | %s | %.0fµs | %d/%d |\n", n,
				o.P50us, s.P50us, ratio(o.P50us, s.P50us), o.P99us, s.P99us, ratio(o.P99us, s.P99us),
				o.CyclesPerSec, s.CyclesPerSec, ratio(o.CyclesPerSec, s.CyclesPerSec), f.P50us, o.Errors, s.Errors)
		}
	}
	if len(r.SlowNode) > 0 {
		b.WriteString("\n### One of five nodes slow or frozen (acquire+release)\n\n| node 5 | redlock p50 | redsync p50 | ratio | redlock p99 | redsync p99 | ratio | redlock cycles | redsync cycles | errors (ours/theirs) |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, k := range []string{"healthy", "+2ms", "+20ms", "+200ms", "frozen"} {
			o, s := r.SlowNode[k]["redlock"], r.SlowNode[k]["redsync"]
			fmt.Fprintf(&b, "| %s | %.0fµs | %.0fµs | %s | %.0fµs | %.0fµs | %s | %d | %d | %d/%d |\n", k,
				o.P50us, s.P50us, ratio(o.P50us, s.P50us), o.P99us, s.P99us, ratio(o.P99us, s.P99us), o.Cycles, s.Cycles, o.Errors, s.Errors)
		}
	}
	if len(r.Contention) > 0 {
		b.WriteString("\n### Hot key, 1 ms critical section\n\n| workers | lib | acquisitions | utilization | wait p50 | wait p99 | wait max | fairness (Jain) |\n|---|---|---|---|---|---|---|---|\n")
		for _, w := range []int{8, 64} {
			for _, lib := range []string{"redlock", "redsync", "single-node"} {
				c := r.Contention[w][lib]
				fmt.Fprintf(&b, "| %d | %s | %d | %.0f%% | %.1fms | %.1fms | %.1fms | %.2f |\n", w, lib, c.Acquisitions, 100*c.Utilization,
					c.WaitP50us/1000, c.WaitP99us/1000, c.WaitMaxUs/1000, c.Fairness)
			}
			o, s := r.Contention[w]["redlock"], r.Contention[w]["redsync"]
			fmt.Fprintf(&b, "| %d | ratio | %s | %s | %s | %s | %s | %s |\n", w, ratio(float64(o.Acquisitions), float64(s.Acquisitions)),
				ratio(o.Utilization, s.Utilization), ratio(o.WaitP50us, s.WaitP50us), ratio(o.WaitP99us, s.WaitP99us), ratio(o.WaitMaxUs, s.WaitMaxUs), ratio(o.Fairness, s.Fairness))
		}
	}
	if len(r.Independent) > 0 {
		o, s, f := r.Independent["redlock"], r.Independent["redsync"], r.Independent["single-node"]
		fmt.Fprintf(&b, "\n### Independent keys, 64 goroutines, 5 nodes\n\n| redlock cycles/s | redsync cycles/s | ratio | single-node cycles/s | errors (ours/theirs) |\n|---|---|---|---|---|\n| %.0f | %.0f | %s | %.0f | %d/%d |\n",
			o.CyclesPerSec, s.CyclesPerSec, ratio(o.CyclesPerSec, s.CyclesPerSec), f.CyclesPerSec, o.Errors, s.Errors)
	}
	if len(r.Allocs) > 0 {
		ao, as, af := r.Allocs["redlock"], r.Allocs["redsync"], r.Allocs["single-node"]
		fmt.Fprintf(&b, "\n### Allocations per acquire+release, 5 nodes\n\n| | redlock | redsync | ratio | single-node |\n|---|---|---|---|---|\n| allocs | %d | %d | %s | %d |\n| bytes | %d | %d | %s | %d |\n",
			ao.AllocsPerCycle, as.AllocsPerCycle, ratio(float64(ao.AllocsPerCycle), float64(as.AllocsPerCycle)), af.AllocsPerCycle,
			ao.BytesPerCycle, as.BytesPerCycle, ratio(float64(ao.BytesPerCycle), float64(as.BytesPerCycle)), af.BytesPerCycle)
	}
	if len(r.Goals) > 0 {
		b.WriteString("\n### Goals\n\n| goal | figure | met |\n|---|---|---|\n")
		for _, g := range r.Goals {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", g.Goal, g.Figure, map[bool]string{true: "yes", false: "**no**"}[g.Met])
		}
	}
	return b.String()
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

// defaultOutDir is bench/results at the repository root when run from the
// repo root or from cmd/redlock (as `make` does), else bench/results here.
func defaultOutDir() string {
	if _, err := os.Stat("../../go.mod"); err == nil {
		if _, err := os.Stat("../../cmd/redlock/go.mod"); err == nil {
			return filepath.Join("..", "..", "bench", "results")
		}
	}
	return filepath.Join("bench", "results")
}
