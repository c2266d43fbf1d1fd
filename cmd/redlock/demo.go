package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/redis/go-redis/v9"
	"io"
	mrand "math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redlock-go/redlock"
)

// demoCfg is the demo's flags.
type demoCfg struct {
	nodes       string
	workers     int
	duration    time.Duration
	ttl, hold   time.Duration
	embedded    bool
	metricsAddr string
	typ         string
	permits     int
}

// demoCmd: workers contend for one lock of the chosen type; halfway
// through, one node stops answering and comes back. An in-process guard
// proves that the type's guarantee held throughout (plain: no two workers
// inside at once).
func demoCmd(fs *flag.FlagSet) runner {
	var cfg demoCfg
	fs.StringVar(&cfg.nodes, "nodes", "", "comma-separated redis:// `URLS`, one per node (default: start 5 local nodes)")
	fs.IntVar(&cfg.workers, "workers", 8, "contending workers")
	fs.DurationVar(&cfg.duration, "duration", 8*time.Second, "how long to run")
	fs.DurationVar(&cfg.ttl, "ttl", 2*time.Second, "lock TTL")
	fs.DurationVar(&cfg.hold, "hold", 2*time.Millisecond, "time spent inside the critical section")
	fs.BoolVar(&cfg.embedded, "embedded", false, "run the 5 nodes in-process (miniredis) even if redis-server is installed")
	fs.StringVar(&cfg.metricsAddr, "metrics-addr", "", "serve the OpenTelemetry metrics for Prometheus at this address, e.g. 127.0.0.1:9464 (default: off)")
	fs.StringVar(&cfg.typ, "type", "plain", "the type of lock the workers take, `TYPE`: "+strings.Join(demoTypes, ", ")+" (reentrant: each hold is entered twice; rw: 1 acquisition in 4 is a write)")
	fs.IntVar(&cfg.permits, "permits", defaultPermits, "permits of the semaphore, with --type semaphore")
	return func(_ []string, out, _ io.Writer) error {
		if cfg.workers < 1 || cfg.duration <= 0 || cfg.hold < 0 || cfg.ttl <= 0 {
			return usageErr("--workers, --duration and --ttl must be positive, --hold not negative")
		}
		if cfg.embedded && cfg.nodes != "" {
			return usageErr("--embedded starts its own nodes; it does not go with --nodes")
		}
		permitsSet := false
		fs.Visit(func(f *flag.Flag) { permitsSet = permitsSet || f.Name == "permits" })
		if err := checkType(cfg.typ, cfg.permits, permitsSet); err != nil {
			return err
		}
		return runDemo(cfg, out)
	}
}

// demo is one run: the Client, what the workers take and what they saw.
type demo struct {
	c       *redlock.Client
	typ     string
	key     string
	permits int
	ttl     time.Duration
	hold    time.Duration
	g       *guard

	mu        sync.Mutex
	perWorker []int
	reads     int // rw: read acquisitions (the others are writes)
	lat       []time.Duration
	secLat    []time.Duration
	secCount  int
	errs      map[string]int
	entries   int            // reentrant: second entries taken
	entryErrs map[string]int // reentrant: second entries refused
}

func runDemo(cfg demoCfg, out io.Writer) error {
	// go-redis logs each refused dial to stderr: the demo counts a node's
	// failed calls itself, so its own lines stay readable.
	redis.SetLogger(quietRedis{})
	dm, err := startMetrics(cfg.metricsAddr)
	if err != nil {
		return err
	}
	defer dm.Close()
	urls, local, stop, err := demoNodes(cfg, out)
	if err != nil {
		return err
	}
	defer stop()
	if err := pingAll(urls); err != nil {
		return err
	}
	if dm.URL != "" {
		fmt.Fprintf(out, "metrics: %s\n", dm.URL)
	}
	opts := dm.Options()
	if embedded(local) {
		// In-process nodes never restart, and miniredis's INFO names no
		// process: the restart quarantine could not judge them.
		opts = append(opts, redlock.WithRestartQuarantine(redlock.QuarantineOff))
	}
	c, err := redlock.NewFromURLs(urls, opts...)
	if err != nil {
		return &exitError{exitUsage, err}
	}
	defer c.Close()
	d := &demo{c: c, typ: cfg.typ, key: demoKey(cfg.typ), permits: cfg.permits, ttl: cfg.ttl, hold: cfg.hold,
		g: newGuard(cfg.typ, cfg.permits), perWorker: make([]int, cfg.workers), errs: map[string]int{}, entryErrs: map[string]int{}}
	fmt.Fprintf(out, "%d workers contend for %q%s (TTL %v, %v inside), quorum %d of %d, for %v\n\n",
		cfg.workers, d.key, typeNote(cfg), cfg.ttl, cfg.hold, c.Quorum(), len(urls), cfg.duration)

	ctx, cancel := context.WithTimeout(context.Background(), cfg.duration)
	defer cancel()
	var wg sync.WaitGroup
	for w := 0; w < cfg.workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			d.work(ctx, w)
		}(w)
	}
	begin := time.Now()
	v := &liveView{d: d, dm: dm, local: local, urls: urls, begin: begin}
	v.run(ctx, out, cfg.duration)
	wg.Wait()
	v.heal()
	return d.summary(out, time.Since(begin), dm, v.timeline)
}

// typeNote names the lock type in the demo's first line ("" for plain,
// whose line is as it always was).
func typeNote(cfg demoCfg) string {
	switch cfg.typ {
	case "rw":
		return " as a read-write lock (1 acquisition in 4 a write)"
	case "semaphore":
		return fmt.Sprintf(" as a semaphore of %d permits", cfg.permits)
	case "reentrant":
		return " as a reentrant lock (each hold entered twice)"
	}
	return ""
}

// demoNodes starts the 5 local nodes, or takes --nodes; stop ends what
// it started.
func demoNodes(cfg demoCfg, out io.Writer) (urls []string, local []localNode, stop func(), err error) {
	if cfg.nodes != "" {
		urls = splitURLs(cfg.nodes)
		fmt.Fprintf(out, "redlock demo: %d nodes given with --nodes (no fault injected)\n", len(urls))
		return urls, nil, func() {}, nil
	}
	nodes, kind, err := startNodes(5, cfg.embedded)
	if err != nil {
		return nil, nil, nil, err
	}
	fmt.Fprintf(out, "redlock demo: 5 nodes on %s\n", kind)
	stop = func() {
		for _, n := range nodes {
			n.Close()
		}
	}
	return urlsOf(nodes), nodes, stop, nil
}

// work is one worker: cycles until the demo's end. A key of another type
// on the nodes ends the worker (every call would fail alike).
func (d *demo) work(ctx context.Context, w int) {
	rng := mrand.New(mrand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
	for ctx.Err() == nil {
		cy, err := d.oneCycle(ctx, rng)
		d.mu.Lock()
		switch {
		case err == nil:
			d.perWorker[w]++
			d.lat = append(d.lat, cy.wait)
			d.secLat = append(d.secLat, cy.wait)
			d.secCount++
			if d.typ == "rw" && !cy.write {
				d.reads++
			}
		case ctx.Err() == nil:
			d.errs[shortErr(err)]++
		}
		d.mu.Unlock()
		if errors.Is(err, redlock.ErrWrongType) {
			return
		}
	}
}

// liveView prints a line per second and runs the fault schedule: node 3
// of the local nodes stops at a third of the run and is back at two
// thirds.
type liveView struct {
	d               *demo
	dm              *demoMetrics
	local           []localNode
	urls            []string
	begin           time.Time
	faulted, healed bool
	timeline        []string
	prevFail        map[string]map[string]int64
}

// run prints, per second, the share of it someone held the lock, and what
// the hand-off did (locks passed on with no round trip; waits ended by a
// node's release notification or by the backoff timer).
func (v *liveView) run(ctx context.Context, out io.Writer, duration time.Duration) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	v.prevFail = v.dm.nodeFailures()
	prevBusy, prevTick := time.Duration(0), v.begin
	prevHS := v.d.c.Stats().Handoff
	fmt.Fprintf(out, "%6s %10s %5s %12s %12s %7s %9s %6s   %s\n", "time", "locks/s", "util", "wait p50", "wait max",
		"passed", "notified", "timer", "nodes (failed node calls in the last second)")
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		el := time.Since(v.begin)
		v.fault(el, duration)
		d := v.d
		d.mu.Lock()
		p50, max := quantile(d.secLat, 0.5), quantile(d.secLat, 1)
		n := d.secCount
		d.secLat, d.secCount = d.secLat[:0], 0
		d.mu.Unlock()
		now, b, hs := time.Now(), d.g.busyTime(), d.c.Stats().Handoff
		util := float64(b-prevBusy) / float64(now.Sub(prevTick))
		fmt.Fprintf(out, "%5.0fs %10d %4.0f%% %12v %12v %7d %9d %6d   %s\n", el.Seconds(), n, 100*util, p50.Round(time.Microsecond), max.Round(time.Microsecond),
			hs.Handed-prevHS.Handed, hs.Notified-prevHS.Notified, hs.Timer-prevHS.Timer, v.state())
		prevBusy, prevTick, prevHS = b, now, hs
	}
}

// fault stops node 3 or brings it back when its time el has come.
func (v *liveView) fault(el, duration time.Duration) {
	if v.local == nil {
		return
	}
	n := v.local[2]
	if !v.faulted && el >= duration/3 {
		if err := n.Fault(); err == nil {
			v.faulted = true
			v.timeline = append(v.timeline, fmt.Sprintf("%5.1fs node 3 (%s) stopped", el.Seconds(), n.Addr()))
		}
	} else if v.faulted && !v.healed && el >= 2*duration/3 {
		if err := n.Heal(); err == nil {
			v.healed = true
			v.timeline = append(v.timeline, fmt.Sprintf("%5.1fs node 3 (%s) back", el.Seconds(), n.Addr()))
		}
	}
}

// heal brings node 3 back if the run ended while it was stopped.
func (v *liveView) heal() {
	if v.faulted && !v.healed {
		_ = v.local[2].Heal()
	}
}

// state is each node's state and its failed calls in the last second.
func (v *liveView) state() string {
	now := v.dm.nodeFailures()
	failed := failureCells(v.d.c.Addrs(), now, v.prevFail)
	v.prevFail = now
	s := make([]string, len(v.urls))
	for i := range s {
		s[i] = "up"
		if v.faulted && !v.healed && i == 2 {
			s[i] = "DOWN"
		}
		if failed[i] != "-" {
			s[i] += "(" + failed[i] + " failed)"
		}
	}
	return strings.Join(s, " ")
}

// summary prints what the run did and returns the verdict: an error when
// the guard saw a violation or nothing was acquired.
func (d *demo) summary(out io.Writer, elapsed time.Duration, dm *demoMetrics, timeline []string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	total := 0
	for _, n := range d.perWorker {
		total += n
	}
	violations, _, _ := d.g.counts()
	fmt.Fprintf(out, "\nsummary after %v\n", elapsed.Round(time.Millisecond))
	fmt.Fprintf(out, "  acquisitions:     %d (%.0f/s)\n", total, float64(total)/elapsed.Seconds())
	fmt.Fprintf(out, "  per worker:       %v\n", d.perWorker)
	if d.typ == "plain" {
		fmt.Fprintf(out, "  overlaps:         %d (two workers inside at once)\n", violations)
	} else {
		d.typeLines(out, total)
		fmt.Fprintf(out, "  violations:       %d (%s)\n", violations, guarantee(d.typ, d.permits))
	}
	fmt.Fprintf(out, "  lock utilization: %.0f%% of the time someone was inside\n", 100*float64(d.g.busyTime())/float64(elapsed))
	fmt.Fprintf(out, "  wait to acquire:  p50 %v  p99 %v  max %v\n", quantile(d.lat, 0.5).Round(time.Microsecond),
		quantile(d.lat, 0.99).Round(time.Microsecond), quantile(d.lat, 1).Round(time.Microsecond))
	d.handoffLines(out, total)
	printCounts(out, "failed Lock calls", d.errs)
	for _, t := range timeline {
		fmt.Fprintf(out, "  fault: %s\n", t)
	}
	nodeFailureLines(out, d.c.Addrs(), dm.nodeFailures())
	if violations > 0 {
		if d.typ == "plain" {
			return fmt.Errorf("%d overlaps: mutual exclusion violated", violations)
		}
		return fmt.Errorf("%d violations of the %s lock's guarantee (%s)", violations, d.typ, guarantee(d.typ, d.permits))
	}
	if total == 0 {
		return errors.New("no lock was acquired")
	}
	return nil
}

// typeLines are the summary's lines of a lock type other than plain.
func (d *demo) typeLines(out io.Writer, total int) {
	_, most, mostRead := d.g.counts()
	switch d.typ {
	case "rw":
		fmt.Fprintf(out, "  reads / writes:   %d / %d (most readers inside at once: %d)\n", d.reads, total-d.reads, mostRead)
	case "semaphore":
		fmt.Fprintf(out, "  most inside:      %d at once, of %d permits\n", most, d.permits)
	case "reentrant":
		fmt.Fprintf(out, "  second entries:   %d taken inside their hold (WithLock)\n", d.entries)
		printCounts(out, "failed re-entries", d.entryErrs)
	}
}

func (d *demo) handoffLines(out io.Writer, total int) {
	hs := d.c.Stats().Handoff
	share := 0.0
	if total > 0 {
		share = 100 * float64(hs.Handed) / float64(total)
	}
	fmt.Fprintf(out, "  hand-off:         %d of %d acquisitions passed on without a round trip (%.0f%%)\n", hs.Handed, total, share)
	fmt.Fprintf(out, "  waits ended by:   release notification %d, local release %d, previous waiter left %d, timer %d\n",
		hs.Notified, hs.Local, hs.Promoted, hs.Timer)
	if hs.SubscribeErrors+hs.ReceiveErrors+hs.Stalls > 0 {
		fmt.Fprintf(out, "  notifications:    %d subscribe errors, %d receive errors, %d stalled connections, %d reconnects\n",
			hs.SubscribeErrors, hs.ReceiveErrors, hs.Stalls, hs.Reconnects)
	}
}

// printCounts prints one line per error text, sorted.
func printCounts(out io.Writer, what string, counts map[string]int) {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(out, "  %s: %d × %s\n", what, counts[k], k)
	}
}

// nodeFailureLines names each node's failed calls over the run.
func nodeFailureLines(out io.Writer, addrs []string, fails map[string]map[string]int64) {
	for i, a := range addrs {
		if len(fails[a]) == 0 {
			continue
		}
		types := make([]string, 0, len(fails[a]))
		for typ, n := range fails[a] {
			types = append(types, fmt.Sprintf("%d %s", n, typ))
		}
		sort.Strings(types)
		fmt.Fprintf(out, "  node %d (%s) failed calls: %s\n", i+1, a, strings.Join(types, ", "))
	}
}

func shortErr(err error) string {
	s := err.Error()
	if i := strings.Index(s, " ["); i > 0 {
		s = s[:i]
	}
	return s
}

// quantile returns the q-quantile of d (sorting it); 0 for none.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	i := int(q * float64(len(d)-1))
	return d[i]
}

// quietRedis is a go-redis logger that drops every line (redis.SetLogger).
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...interface{}) {}
