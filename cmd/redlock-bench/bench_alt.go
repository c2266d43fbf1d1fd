package main

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// altHeads is the header cells of the single-node alternatives' columns
// ("label what | " each), altSeps their separators.
func altHeads(what string) string {
	var b strings.Builder
	for _, lib := range altLibs {
		b.WriteString(strings.TrimSpace(label(lib)+" "+what) + " | ")
	}
	return b.String()
}

func altSeps() string { return strings.Repeat("---|", len(altLibs)) }

// altCells is the alternatives' cells ("x | " each; "-" where m has none).
func altCells[V any](m map[string]V, f func(V) string) string {
	var b strings.Builder
	for _, lib := range altLibs {
		if v, ok := m[lib]; ok {
			b.WriteString(f(v) + " | ")
		} else {
			b.WriteString("- | ")
		}
	}
	return b.String()
}

func cyclesCell(s Stat) string { return fmt.Sprintf("%.0f", s.CyclesPerSec) }

// hasAlt tells whether r has a figure of a single-node alternative (then
// results.md has the legend of what each contender guarantees).
func hasAlt(r *Results) bool {
	has := func(m map[string]bool) bool { return m[bsmName] || m[rueidisName] }
	libs := map[string]bool{}
	for _, m := range r.Uncontended {
		for k := range m {
			libs[k] = true
		}
	}
	for _, m := range r.Contention {
		for k := range m {
			libs[k] = true
		}
	}
	for _, m := range r.Scaling {
		for k := range m {
			libs[k] = true
		}
	}
	for k := range r.Independent {
		libs[k] = true
	}
	for k := range r.Allocs {
		libs[k] = true
	}
	return has(libs)
}

// scalingLibs are the contenders of the scaling table and plot, in order.
func scalingLibs() []string { return append([]string{"redlock", "redsync", "single-node"}, altLibs...) }

// scalingTable is independent-key cycles/s by goroutine count, every
// contender, with redlock / go-redsync.
func scalingTable(r *Results) string {
	var b strings.Builder
	b.WriteString("\n### Scaling: independent keys, acquire+release cycles/s by goroutines, 5 nodes\n\n| goroutines | redlock | redsync | ratio | ")
	for _, lib := range scalingLibs()[2:] {
		b.WriteString(label(lib) + " | ")
	}
	b.WriteString("errors (ours/theirs) |\n|---|---|---|---|" + strings.Repeat("---|", len(scalingLibs())-2) + "---|\n")
	var gs []int
	for g := range r.Scaling {
		gs = append(gs, g)
	}
	sort.Ints(gs)
	for _, g := range gs {
		m := r.Scaling[g]
		o, s := m["redlock"], m["redsync"]
		fmt.Fprintf(&b, "| %d | %.0f | %.0f | %s | ", g, o.CyclesPerSec, s.CyclesPerSec, ratio(o.CyclesPerSec, s.CyclesPerSec))
		for _, lib := range scalingLibs()[2:] {
			if x, ok := m[lib]; ok {
				b.WriteString(cyclesCell(x) + " | ")
			} else {
				b.WriteString("- | ")
			}
		}
		fmt.Fprintf(&b, "%d/%d |\n", o.Errors, s.Errors)
	}
	b.WriteString("\n![cycles/s vs goroutines](scaling_independent.png)\n")
	return b.String()
}

// quantile sorts d and returns its q-quantile (nearest rank below); 0 for
// no samples.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	i := int(q * float64(len(d)-1))
	return d[i]
}
