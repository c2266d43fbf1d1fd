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

func plotNodes(r *Results, libs []string, dir string) error {
	p := plot.New()
	p.Legend.Top, p.Legend.Left = true, true
	p.Title.Text = "acquire+release p50 vs number of nodes"
	p.X.Label.Text = "nodes"
	p.Y.Label.Text = "p50 (µs)"
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
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return err
	}
	return p.Save(6*vg.Inch, 4*vg.Inch, filepath.Join(dir, "latency_vs_nodes.png"))
}

func plotDelay(r *Results, libs []string, dir string) error {
	q := plot.New()
	q.Legend.Top, q.Legend.Left = true, true
	q.Title.Text = "acquire+release p99, one of five nodes delayed"
	q.X.Label.Text = "added delay on node 5 (ms)"
	q.Y.Label.Text = "p99 (ms, log scale)"
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
	if err := plotutil.AddLinePoints(q, lines...); err != nil {
		return err
	}
	return q.Save(6*vg.Inch, 4*vg.Inch, filepath.Join(dir, "latency_vs_delay.png"))
}
