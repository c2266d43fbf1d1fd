package main

import (
	"math"
	"path/filepath"
	"slices"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// plots writes the PNGs for the sections r has and returns their names.
func plots(r *Results, dir string) ([]string, error) {
	libs := []string{"redlock", "redsync", "single-node"}
	var wrote []string
	if len(r.Uncontended) > 0 {
		if err := plotNodes(r, libs, dir); err != nil {
			return nil, err
		}
		wrote = append(wrote, "latency_vs_nodes.png")
	}
	if len(r.SlowNode) > 0 {
		if err := plotDelay(r, libs, dir); err != nil {
			return nil, err
		}
		wrote = append(wrote, "latency_vs_delay.png")
	}
	if len(r.Scaling) > 0 {
		if err := plotScaling(r, dir); err != nil {
			return nil, err
		}
		wrote = append(wrote, "scaling_independent.png")
	}
	if len(r.Watchdog) > 0 {
		for _, f := range watchFigures {
			if err := plotWatch(r, f, dir); err != nil {
				return nil, err
			}
			wrote = append(wrote, f.file)
		}
	}
	return wrote, nil
}

// saveLog draws lines (name, points, ...; points all above 0, lines
// without points left out) on p with both axes on log scales, ranges
// padded around the data (a single value would otherwise give an empty or
// non-positive range) and room above the lines for the legend (top left),
// and writes it.
func saveLog(p *plot.Plot, lines []interface{}, path string) error {
	var keep []interface{}
	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for i := 0; i+1 < len(lines); i += 2 {
		pts := lines[i+1].(plotter.XYs)
		if len(pts) == 0 {
			continue
		}
		keep = append(keep, lines[i], pts)
		for _, q := range pts {
			xmin, xmax, ymin, ymax = math.Min(xmin, q.X), math.Max(xmax, q.X), math.Min(ymin, q.Y), math.Max(ymax, q.Y)
		}
	}
	if len(keep) == 0 {
		return save(p, nil, path) // nothing measured: an empty linear plot
	}
	if err := plotutil.AddLinePoints(p, keep...); err != nil {
		return err
	}
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	room := math.Pow(2, float64(len(keep)/2)) // a factor of 2 per legend line
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = xmin/1.5, xmax*1.5, ymin/2, ymax*2*room
	return p.Save(6*vg.Inch, 4.5*vg.Inch, path)
}

// plotScaling: independent keys, cycles/s vs goroutines, every contender.
func plotScaling(r *Results, dir string) error {
	p := newPlot("independent keys: acquire+release cycles/s vs goroutines (5 nodes)", "goroutines (log scale)", "cycles/s (log scale)")
	var gs []int
	for g := range r.Scaling {
		gs = append(gs, g)
	}
	sort.Ints(gs)
	var lines []interface{}
	for _, lib := range scalingLibs() {
		var pts plotter.XYs
		for _, g := range gs {
			if s, ok := r.Scaling[g][lib]; ok && s.CyclesPerSec > 0 {
				pts = append(pts, plotter.XY{X: float64(g), Y: s.CyclesPerSec})
			}
		}
		lines = append(lines, label(lib), pts)
	}
	return saveLog(p, lines, filepath.Join(dir, "scaling_independent.png"))
}

// watchFigure is one watchdog figure plotted against held locks.
type watchFigure struct {
	file, title, y string
	f              func(WatchStat) float64
}

var watchFigures = []watchFigure{
	{"watchdog_calls_vs_locks.png", "held locks: script calls per renewal interval, busiest node", "script calls / interval (log scale)",
		func(w WatchStat) float64 { return w.RoundTrips }},
	{"watchdog_cpu_vs_locks.png", "held locks: client CPU per renewal interval, above idle", "CPU ms / interval (log scale)",
		func(w WatchStat) float64 { return w.CPUms }},
}

// plotWatch plots one watchdog figure vs held locks, redlock's watchdog
// and go-redsync's goroutine per lock, on log axes; points at or below 0
// (CPU within the noise) are left out.
func plotWatch(r *Results, f watchFigure, dir string) error {
	p := newPlot(f.title, "locks held (log scale)", f.y)
	var ns []int
	for n := range r.Watchdog {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	var lines []interface{}
	for _, lib := range []string{"redlock", "redsync"} {
		var pts plotter.XYs
		for _, n := range ns {
			if v := f.f(r.Watchdog[n][lib]); v > 0 {
				pts = append(pts, plotter.XY{X: float64(n), Y: v})
			}
		}
		lines = append(lines, map[string]string{"redlock": "redlock (watchdog)", "redsync": "redsync (goroutine per lock, Extend)"}[lib], pts)
	}
	return saveLog(p, lines, filepath.Join(dir, f.file))
}

// newPlot returns a plot with its labels and the legend top left.
func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Legend.Top, p.Legend.Left = true, true
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	return p
}

// save draws lines (name, points, name, points, ...) on p and writes it.
func save(p *plot.Plot, lines []interface{}, path string) error {
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return err
	}
	return p.Save(6*vg.Inch, 4*vg.Inch, path)
}

func plotNodes(r *Results, libs []string, dir string) error {
	p := newPlot("acquire+release p50 vs number of nodes", "nodes", "p50 (µs)")
	var ns []int
	for n := range r.Uncontended {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	var lines []interface{}
	for _, lib := range append(libs, altLibs...) { // the 1-node alternatives: on the first node, whatever N
		pts := make(plotter.XYs, 0, len(ns))
		for _, n := range ns {
			if s, ok := r.Uncontended[n][lib]; ok || !slices.Contains(altLibs, lib) {
				pts = append(pts, plotter.XY{X: float64(n), Y: s.P50us})
			}
		}
		if len(pts) > 0 {
			lines = append(lines, label(lib), pts)
		}
	}
	return save(p, lines, filepath.Join(dir, "latency_vs_nodes.png"))
}

func plotDelay(r *Results, libs []string, dir string) error {
	q := newPlot("acquire+release p99, one of five nodes delayed", "added delay on node 5 (ms)", "p99 (ms, log scale)")
	q.Y.Scale = plot.LogScale{}
	q.Y.Tick.Marker = plot.LogTicks{}
	delays := []struct {
		k  string
		ms float64
	}{{"healthy", 0.1}, {"+2ms", 2}, {"+20ms", 20}, {"+200ms", 200}}
	q.X.Scale = plot.LogScale{}
	q.X.Tick.Marker = plot.LogTicks{}
	var lines []interface{}
	for _, lib := range libs[:2] {
		pts := make(plotter.XYs, 0, len(delays))
		for _, d := range delays {
			y := r.SlowNode[d.k][lib].P99us / 1000
			if y <= 0 {
				continue
			}
			pts = append(pts, plotter.XY{X: d.ms, Y: y})
		}
		lines = append(lines, lib, pts)
	}
	return save(q, lines, filepath.Join(dir, "latency_vs_delay.png"))
}
