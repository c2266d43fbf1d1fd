package main

import (
	"path/filepath"
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
	return wrote, nil
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
	for _, lib := range libs {
		pts := make(plotter.XYs, 0, len(ns))
		for _, n := range ns {
			pts = append(pts, plotter.XY{X: float64(n), Y: r.Uncontended[n][lib].P50us})
		}
		lines = append(lines, lib, pts)
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
