package main

import (
	"strings"
	"testing"
)

// bench --only types at --quick sizes: every lock type has an uncontended
// figure, the read-mostly runs are in the JSON, results.md has both tables
// and the goal. Figures and whether the goal is met are not judged: they
// depend on the machine.
func TestBenchTypes(t *testing.T) {
	out, r, _ := runBench(t, []string{"Lock types: uncontended acquire+release", "| semaphore(3) |", "| reentrant |",
		"Lock types: read-mostly hot key, 8 workers", "| 90% | ratio |", "| 100% | ratio |",
		"read-write lock's reads/s >= 5 x the plain lock's"}, "--quick", "--only", "types")
	if strings.Contains(out, "Uncontended acquire+release\n") || strings.Contains(out, "Hot key, 5 nodes") {
		t.Errorf("--only types ran other scenarios:\n%s", out)
	}
	for _, l := range typeLabels {
		if s, ok := r.TypesUncontended[l]; !ok || s.Cycles+s.Errors <= 0 {
			t.Errorf("uncontended %s: %+v (present %v)", l, s, ok)
		}
	}
	for _, k := range mixKeys {
		if m, ok := r.ReadMostly[k]; !ok || m.Reads+m.Writes+m.Errors <= 0 {
			t.Errorf("read-mostly %s: %+v (present %v)", k, m, ok)
		}
	}
}

// Merged runs: medians of the rates, sums of the counts.
func TestMergeTypes(t *testing.T) {
	run := func(rps float64, reads int) *Results {
		r := newResults()
		r.TypesUncontended = map[string]Stat{typePlain: {P50us: rps, Cycles: reads}}
		r.ReadMostly = map[string]MixStat{"rw": {ReadsPerSec: rps, Reads: reads}}
		return r
	}
	m := merge([]*Results{run(10, 1), run(30, 2), run(20, 3)})
	if s, x := m.TypesUncontended[typePlain], m.ReadMostly["rw"]; s.P50us != 20 || s.Cycles != 6 || x.ReadsPerSec != 20 || x.Reads != 6 {
		t.Errorf("merged: %+v, %+v", s, x)
	}
	if g := typesGoals(m); len(g) != 1 || g[0].Met {
		t.Errorf("goals without a plain figure: %+v", g)
	}
}
