package chaos

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"time"

	"github.com/redlock-go/redlock/integration/harness"
)

// Fault kinds the nemesis draws from.
const (
	FKill        = "kill"         // SIGKILL a node, bring it up after the fault's duration
	FPause       = "pause"        // SIGSTOP / docker pause, then resume
	FRestart     = "restart"      // kill and restart at once
	FLatency     = "latency"      // 5-40ms on one client group's link to a node
	FBlackhole   = "blackhole"    // one group's link to a node drops everything
	FDropReplies = "drop-replies" // requests arrive, answers are lost (ambiguous)
	FReset       = "reset"        // every connection to a node reset once
	FPartition   = "partition"    // asymmetric: group 0 cannot reach the last two nodes, group 1 the first two
	FIsolate     = "isolate"      // node cut off from every client
)

// Fault is one scheduled fault.
type Fault struct {
	At    time.Duration // after the start of the workload
	For   time.Duration
	Kind  string
	Node  int
	Group int
	Lat   time.Duration
}

func (f Fault) String() string {
	return fmt.Sprintf("%v %s node=%d group=%d for=%v", f.At.Round(time.Millisecond), f.Kind, f.Node, f.Group, f.For.Round(time.Millisecond))
}

// Schedule draws faults from seed, one at a time, inside [0, within).
// The same seed, kinds and bounds give the same schedule (replay with
// CHAOS_SEED); the outcome still depends on timing.
func Schedule(seed uint64, kinds []string, nodes []int, groups int, within, gapMin, gapMax, durMin, durMax time.Duration) []Fault {
	if len(kinds) == 0 {
		return nil
	}
	rng := mrand.New(mrand.NewPCG(seed, 0x6e656d))
	var out []Fault
	at := time.Duration(0)
	for {
		at += gapMin + time.Duration(rng.Int64N(int64(gapMax-gapMin)+1))
		f := Fault{At: at, Kind: kinds[rng.IntN(len(kinds))], Node: nodes[rng.IntN(len(nodes))], Group: rng.IntN(groups),
			For: durMin + time.Duration(rng.Int64N(int64(durMax-durMin)+1)), Lat: time.Duration(5+rng.IntN(36)) * time.Millisecond}
		if f.Kind == FRestart || f.Kind == FReset {
			f.For = 0
		}
		if at+f.For > within {
			return out
		}
		out = append(out, f)
		at += f.For
	}
}

// Nemesis runs a schedule against the cluster and heals everything at the
// end (also when ctx is cancelled). It returns how many faults it injected
// and the first error from a fault action.
func Nemesis(ctx context.Context, c *Cluster, sched []Fault, logf func(string, ...any)) (int, map[string]int, error) {
	start := time.Now()
	counts := map[string]int{}
	var firstErr error
	note := func(err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	injected := 0
	defer func() { note(c.HealAll()) }()
	for _, f := range sched {
		if !sleepUntil(ctx, start.Add(f.At)) {
			break
		}
		logf("nemesis: %s", f)
		injected++
		counts[f.Kind]++
		heal := func() {}
		n := c.Nodes[f.Node]
		p := c.Proxies[f.Group%len(c.Proxies)][f.Node]
		switch f.Kind {
		case FKill:
			note(n.Kill())
			heal = func() { note(n.Up()) }
		case FPause:
			note(n.Freeze())
			heal = func() { note(n.Thaw()) }
		case FRestart:
			note(n.Restart())
		case FLatency:
			p.SetLatency(f.Lat)
			heal = p.Heal
		case FBlackhole:
			p.Set(harness.Blackhole)
			heal = p.Heal
		case FDropReplies:
			p.Set(harness.DropReplies)
			heal = p.Heal
		case FReset:
			for _, row := range c.Proxies {
				row[f.Node].ResetConns()
			}
		case FPartition:
			cut := Partition(c)
			heal = cut
		case FIsolate:
			note(n.Isolate())
			heal = func() { note(n.Rejoin()) }
		}
		sleepUntil(ctx, time.Now().Add(f.For))
		heal()
	}
	return injected, counts, firstErr
}

// Partition cuts group 0 off the last two nodes and group 1 off the first
// two (asymmetric: each side still reaches a majority only through the
// middle node). It returns the heal function.
func Partition(c *Cluster) func() {
	n := len(c.Nodes)
	var cut []*harness.Proxy
	for g, row := range c.Proxies {
		for i, p := range row {
			if (g%2 == 0 && i >= n-2) || (g%2 == 1 && i < 2) {
				p.Set(harness.Refuse)
				cut = append(cut, p)
			}
		}
	}
	return func() {
		for _, p := range cut {
			p.Heal()
		}
	}
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func summarize(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	var b []string
	for _, k := range []string{FKill, FPause, FRestart, FLatency, FBlackhole, FDropReplies, FReset, FPartition, FIsolate} {
		if m[k] > 0 {
			b = append(b, fmt.Sprintf("%s×%d", k, m[k]))
		}
	}
	return strings.Join(b, " ")
}
