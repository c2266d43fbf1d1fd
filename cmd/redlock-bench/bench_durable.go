package main

import (
	"fmt"
	"os/exec"
	"strings"

	"github.com/redlock-go/redlock"
)

// DurableStat is one contender on nodes of one fsync mode: uncontended
// acquire+release and the hot key with 8 workers.
type DurableStat struct {
	Uncontended Stat     `json:"uncontended"`
	HotKey      ContStat `json:"hot_key_8"`
}

// durableModes are the node settings of the durable-votes scenario: Valkey
// with appendonly yes, appendfsync everysec (hz 100: WAITAOF waits for the
// next fsync, about 1/hz) and always.
var durableModes = []struct {
	name string
	args []string
}{
	{"everysec, hz 100", []string{"--appendonly", "yes", "--appendfsync", "everysec", "--hz", "100"}},
	{"always", []string{"--appendonly", "yes", "--appendfsync", "always"}},
}

// durableScenario measures durable votes (WithDurableVotes) beside the same
// library without them and go-redsync, on 5 Valkey nodes (valkey-server on
// PATH; make durable installs it) per fsync mode. Without valkey-server it
// records why it did not run.
func durableScenario(cfg benchCfg, res *Results, p *progress) error {
	bin, err := exec.LookPath("valkey-server")
	if err != nil {
		res.DurableSkipped = "no valkey-server on PATH (make durable installs Valkey 8.0 from bookworm-backports)"
		return nil
	}
	res.Durable = map[string]map[string]DurableStat{}
	for _, m := range durableModes {
		p.step("durable votes, " + m.name)
		err := withNodesOf(bin, m.args, 5, func(_ []*node, urls []string) error {
			ours, err := newOursAs("redlock", urls)
			if err != nil {
				return err
			}
			dur, err := newOursAs("redlock-durable", urls, redlock.WithDurableVotes())
			if err != nil {
				ours.close()
				return err
			}
			rs, err := newRsync(urls)
			if err != nil {
				ours.close()
				dur.close()
				return err
			}
			cs := []contender{ours, dur, rs}
			defer closeContenders(cs)
			un := uncontended(cs, cfg.iters, cfg.block, nil)
			out := map[string]DurableStat{}
			for _, c := range cs {
				out[c.name()] = DurableStat{Uncontended: un[c.name()], HotKey: contention(c, 8, cfg.contention)}
			}
			res.Durable[m.name] = out
			return nil
		})
		if err != nil {
			return fmt.Errorf("durable votes, %s: %w", m.name, err)
		}
	}
	return nil
}

// mergeDurable takes the median of every figure over the runs.
func mergeDurable(runs []*Results) map[string]map[string]DurableStat {
	out := map[string]map[string]DurableStat{}
	for mode, ms := range group(each(runs, func(r *Results) map[string]map[string]DurableStat { return r.Durable })) {
		out[mode] = map[string]DurableStat{}
		for lib, ds := range group(ms) {
			un := mergeStats(each(ds, func(d DurableStat) map[string]Stat { return map[string]Stat{lib: d.Uncontended} }))[lib]
			out[mode][lib] = DurableStat{Uncontended: un, HotKey: ContStat{
				Acquisitions: int(median(ds, func(d DurableStat) float64 { return float64(d.HotKey.Acquisitions) })),
				Utilization:  median(ds, func(d DurableStat) float64 { return d.HotKey.Utilization }),
				WaitP99us:    median(ds, func(d DurableStat) float64 { return d.HotKey.WaitP99us }),
			}}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// durableTable is the scenario's Markdown table, ratios against the same
// library without durable votes and against go-redsync.
func durableTable(r *Results) string {
	if r.DurableSkipped != "" {
		return "\n### Durable votes\n\nNot run: " + r.DurableSkipped + ".\n"
	}
	if len(r.Durable) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n### Durable votes (WithDurableVotes), 5 Valkey nodes with appendonly yes\n\n")
	b.WriteString("Acquire+release p50 uncontended, and the hot key with 8 workers holding 1 ms. durable / plain: the cost of WAITAOF after every vote; durable / redsync: beside go-redsync on the same nodes (whose votes are not durable).\n\n")
	b.WriteString("| appendfsync | redlock p50 | redlock-durable p50 | redsync p50 | durable / plain | durable / redsync | redlock hot-key util | durable util | redsync util | durable acquisitions / plain |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, m := range durableModes {
		d, ok := r.Durable[m.name]
		if !ok {
			continue
		}
		o, du, rs := d["redlock"], d["redlock-durable"], d["redsync"]
		fmt.Fprintf(&b, "| %s | %.0f us | %.0f us | %.0f us | %s | %s | %.0f %% | %.0f %% | %.0f %% | %s |\n", m.name,
			o.Uncontended.P50us, du.Uncontended.P50us, rs.Uncontended.P50us, ratio(du.Uncontended.P50us, o.Uncontended.P50us),
			ratio(du.Uncontended.P50us, rs.Uncontended.P50us), 100*o.HotKey.Utilization, 100*du.HotKey.Utilization, 100*rs.HotKey.Utilization,
			ratio(float64(du.HotKey.Acquisitions), float64(o.HotKey.Acquisitions)))
	}
	return b.String()
}
