package main

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/redlock-go/redlock"
)

// MixStat is one run of the read-mostly hot key: workers that read 9 times
// in 10 and write otherwise, through one lock type.
type MixStat struct {
	Reads        int     `json:"reads"`
	Writes       int     `json:"writes"`
	ReadsPerSec  float64 `json:"reads_per_sec"`
	WritesPerSec float64 `json:"writes_per_sec"`
	Errors       int     `json:"errors"` // Lock calls that failed before the run's end
}

// The lock types' labels in the bench, in table order.
const (
	typePlain     = "plain"
	typeReentrant = "reentrant"
	typeRead      = "read"
	typeWrite     = "write"
	typeSemaphore = "semaphore(3)"
)

var typeLabels = []string{typePlain, typeReentrant, typeRead, typeWrite, typeSemaphore}

// The read-mostly hot key: workers on one Client, share of reads, time
// inside.
const (
	mixWorkers = 8
	mixReads   = 0.9
	mixHold    = time.Millisecond
)

// typed is this library taking one lock type, as a contender.
type typed struct {
	c     *redlock.Client
	label string
	opts  []redlock.LockOption
}

func (t *typed) name() string { return t.label }
func (t *typed) try(ctx context.Context, key string) (func() error, error) {
	l, err := t.c.TryLock(ctx, key, benchTTL, t.opts...)
	if err != nil {
		return nil, err
	}
	return func() error { return l.Release(context.Background()) }, nil
}
func (t *typed) lock(ctx context.Context, key string) (func() error, error) {
	l, err := t.c.Lock(ctx, key, benchTTL, t.opts...)
	if err != nil {
		return nil, err
	}
	return func() error { return l.Release(context.Background()) }, nil
}
func (t *typed) close() {} // the Client is shared: typesScenario closes it

// typeContenders are the lock types on one Client, plain first.
func typeContenders(c *redlock.Client) []contender {
	opts := map[string][]redlock.LockOption{typePlain: nil, typeReentrant: {redlock.Reentrant()},
		typeRead: {redlock.ReadLock()}, typeWrite: {redlock.WriteLock()}, typeSemaphore: {redlock.Permits(3)}}
	var cs []contender
	for _, l := range typeLabels {
		cs = append(cs, &typed{c: c, label: l, opts: opts[l]})
	}
	return cs
}

// typesScenario measures each lock type's uncontended acquire+release
// beside the plain lock's, then the read-mostly hot key with the
// read-write lock and with the plain lock.
func typesScenario(cfg benchCfg, urls []string, res *Results, p *progress) error {
	c, err := redlock.NewFromURLs(urls)
	if err != nil {
		return err
	}
	defer c.Close()
	p.step("lock types, uncontended")
	res.TypesUncontended = uncontended(typeContenders(c), cfg.iters, cfg.block, nil)
	p.step(fmt.Sprintf("lock types, read-mostly hot key, %d workers", mixWorkers))
	res.ReadMostly = map[string]MixStat{}
	for _, k := range mixKeys {
		res.ReadMostly[k] = readMostly(c, "mix:"+k, strings.HasPrefix(k, "rw"), mixShare(k), cfg.mix)
	}
	return nil
}

// mixKeys are the read-mostly runs: each lock at mixReads, and with reads
// only (no writer: how far readers share when nothing keeps them out).
var mixKeys = []string{"rw", "plain", "rw/reads-only", "plain/reads-only"}

func mixShare(k string) float64 {
	if strings.HasSuffix(k, "/reads-only") {
		return 1
	}
	return mixReads
}

// readMostly runs mixWorkers workers on key for dur: each cycle reads
// (share of them) or writes, holding the lock for mixHold; rw takes
// ReadLock/WriteLock, otherwise every cycle takes the plain lock.
func readMostly(c *redlock.Client, key string, rw bool, share float64, dur time.Duration) MixStat {
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var mu sync.Mutex
	var s MixStat
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < mixWorkers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := mrand.New(mrand.NewPCG(uint64(w), 1)) // the same sequence of reads and writes for both locks
			for ctx.Err() == nil {
				read := rng.Float64() < share
				err := mixCycle(ctx, c, key, rw, read)
				mu.Lock()
				switch {
				case err == nil && read:
					s.Reads++
				case err == nil:
					s.Writes++
				case ctx.Err() == nil:
					s.Errors++
				}
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	s.ReadsPerSec, s.WritesPerSec = float64(s.Reads)/el, float64(s.Writes)/el
	return s
}

// mixCycle takes the lock once, holds it for mixHold and releases it.
func mixCycle(ctx context.Context, c *redlock.Client, key string, rw, read bool) error {
	var opts []redlock.LockOption
	if rw && read {
		opts = append(opts, redlock.ReadLock())
	} else if rw {
		opts = append(opts, redlock.WriteLock())
	}
	l, err := c.Lock(ctx, key, benchTTL, opts...)
	if err != nil {
		return err
	}
	time.Sleep(mixHold)
	return l.Release(context.Background())
}

// mergeMix is the median of each figure over the runs, with the counts
// summed.
func mergeMix(ms []MixStat) MixStat {
	out := MixStat{
		ReadsPerSec:  median(ms, func(m MixStat) float64 { return m.ReadsPerSec }),
		WritesPerSec: median(ms, func(m MixStat) float64 { return m.WritesPerSec }),
	}
	for _, m := range ms {
		out.Reads += m.Reads
		out.Writes += m.Writes
		out.Errors += m.Errors
	}
	return out
}

// typesTables is the lock types' section of results.md.
func typesTables(r *Results) string {
	var b strings.Builder
	if len(r.TypesUncontended) > 0 {
		b.WriteString("\n### Lock types: uncontended acquire+release, 5 nodes, one Client\n\n| type | p50 | p99 | cycles/s | p50 / plain p50 | errors |\n|---|---|---|---|---|---|\n")
		plain := r.TypesUncontended[typePlain]
		for _, l := range typeLabels {
			s := r.TypesUncontended[l]
			fmt.Fprintf(&b, "| %s | %.0fµs | %.0fµs | %.0f | %s | %d |\n", l, s.P50us, s.P99us, s.CyclesPerSec, ratio(s.P50us, plain.P50us), s.Errors)
		}
	}
	if len(r.ReadMostly) > 0 {
		fmt.Fprintf(&b, "\n### Lock types: read-mostly hot key, %d workers on one Client, %v inside, 5 nodes\n\n", mixWorkers, mixHold)
		b.WriteString("Each cycle reads or writes, the same sequence for both locks; with the plain lock readers exclude each other, with the read-write lock they share (a refused writer keeps new readers out). Reads only: no writer.\n\n| reads | lock | reads/s | writes/s | reads | writes | errors |\n|---|---|---|---|---|---|---|\n")
		for i := 0; i < len(mixKeys); i += 2 {
			for _, k := range mixKeys[i : i+2] {
				m := r.ReadMostly[k]
				label := map[bool]string{true: "ReadLock / WriteLock", false: "plain lock"}[strings.HasPrefix(k, "rw")]
				fmt.Fprintf(&b, "| %.0f%% | %s | %.0f | %.0f | %d | %d | %d |\n", 100*mixShare(k), label, m.ReadsPerSec, m.WritesPerSec, m.Reads, m.Writes, m.Errors)
			}
			rw, pl := r.ReadMostly[mixKeys[i]], r.ReadMostly[mixKeys[i+1]]
			fmt.Fprintf(&b, "| %.0f%% | ratio | %s | %s | | | |\n", 100*mixShare(mixKeys[i]), ratio(rw.ReadsPerSec, pl.ReadsPerSec), ratio(rw.WritesPerSec, pl.WritesPerSec))
		}
	}
	return b.String()
}

// typesGoals: reader throughput of the read-write lock against the plain
// lock on the read-mostly hot key.
func typesGoals(r *Results) []Goal {
	rw, ok := r.ReadMostly["rw"]
	if !ok {
		return nil
	}
	pl, ro, po := r.ReadMostly["plain"], r.ReadMostly["rw/reads-only"], r.ReadMostly["plain/reads-only"]
	return []Goal{{fmt.Sprintf("read-mostly hot key, %d workers (%.0f%% reads): read-write lock's reads/s >= 5 x the plain lock's", mixWorkers, 100*mixReads),
		fmt.Sprintf("%.0f vs %.0f (%s; reads only: %.0f vs %.0f, %s)", rw.ReadsPerSec, pl.ReadsPerSec, ratio(rw.ReadsPerSec, pl.ReadsPerSec),
			ro.ReadsPerSec, po.ReadsPerSec, ratio(ro.ReadsPerSec, po.ReadsPerSec)), pl.ReadsPerSec > 0 && rw.ReadsPerSec >= 5*pl.ReadsPerSec}}
}
