package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
}

func TestBenchBadFlags(t *testing.T) {
	for _, args := range [][]string{{"bench", "--only", "bogus"}, {"bench", "--repeat", "-1"}, {"bench", "--nope"}} {
		if code, _, errOut := runCmd(t, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, exitUsage, errOut)
		}
	}
}

// A short real run of two scenarios, repeated: files written, medians over
// both runs, the runs kept in the JSON.
func TestBenchOnlyRepeat(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCmd(t, "bench", "--quick", "--only", "independent,allocs", "--repeat", "2", "--out", dir)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"median of 2 runs", "Independent keys", "Allocations per acquire+release", "fewer allocations per cycle"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Uncontended") {
		t.Errorf("--only ran the uncontended scenario:\n%s", out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.Repeat != 2 || len(r.Runs) != 2 || r.Independent["redlock"].CyclesPerSec <= 0 || r.Allocs["redsync"].AllocsPerCycle <= 0 {
		t.Fatalf("results.json: repeat %d, %d runs, independent %+v, allocs %+v", r.Repeat, len(r.Runs), r.Independent, r.Allocs)
	}
	if _, err := os.Stat(filepath.Join(dir, "results.md")); err != nil {
		t.Fatal(err)
	}
}
