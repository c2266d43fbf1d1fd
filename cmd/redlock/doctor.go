package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/admin"
)

// Verdicts of a doctor check. INFO is no verdict: what was found cannot
// fail with the settings given (WAITAOF without --durable) or could not be
// looked at without harm; it counts as OK.
const (
	verdictOK   = "OK"
	verdictInfo = "INFO"
	verdictWarn = "WARN"
	verdictFail = "FAIL"
)

// The checks doctor runs on every reachable node, in report order. An
// unreachable node gets only checkConnect.
const (
	checkConnect     = "connect"
	checkRole        = "role"
	checkDistinct    = "distinct"
	checkPersistence = "persistence"
	checkUptime      = "uptime"
	checkEviction    = "eviction"
	checkClock       = "clock"
	checkLatency     = "latency"
	checkVersion     = "version"
	checkDurable     = "durable-votes"
)

var doctorChecks = []string{checkRole, checkDistinct, checkPersistence, checkUptime, checkEviction, checkClock, checkLatency, checkVersion, checkDurable, checkRestartWindow}

// doctorCallTimeout bounds each INFO, CONFIG, PING and TIME doctor sends.
const doctorCallTimeout = 2 * time.Second

// Check is one verdict on one node.
type Check struct {
	Check   string `json:"check"`
	Verdict string `json:"verdict"` // OK, INFO (not judged), WARN or FAIL
	Reason  string `json:"reason"`
}

// ClockReport compares a node's clock with the client's over the sampling
// window. Redis expires keys on its own wall clock: the rate at which that
// clock runs against the client's monotonic clock is what the drift factor
// must cover; the offset does not matter.
type ClockReport struct {
	Samples        int     `json:"samples"`         // TIME samples the rate is estimated over (those since the last jump)
	WindowMs       float64 `json:"window_ms"`       // client monotonic time from the first to the last sample used
	OffsetMs       float64 `json:"offset_ms"`       // node time − client wall time at the fastest sample's midpoint
	OffsetErrMs    float64 `json:"offset_err_ms"`   // ± half that sample's round trip
	RateErrorPPM   float64 `json:"rate_error_ppm"`  // 1 − clientRate/nodeRate (the drift monitor's measure), in ppm; positive: the node's clock runs fast
	ResolutionPPM  float64 `json:"resolution_ppm"`  // half-width of the interval around RateErrorPPM that surely holds the true error, given the round trips
	MaxResidualUs  float64 `json:"max_residual_us"` // largest distance of a sample from the line of the estimated rate
	Jumps          int     `json:"jumps"`           // steps of the node's clock the rate cannot explain (the estimate restarts after each)
	DriftBudgetPPM float64 `json:"drift_budget_ppm"`
	StepsBack      int     `json:"steps_back"` // TIME samples below the previous one: the node's clock stepped back
	SkewMs         float64 `json:"skew_ms"`    // largest offset difference to another node, less both measuring errors (at least 0)
}

// LatencyReport is the round-trip time of PINGs to a node.
type LatencyReport struct {
	Pings  int     `json:"pings"`
	Failed int     `json:"failed"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"` // nearest rank: the maximum below 100 pings
	MaxMs  float64 `json:"max_ms"`
}

// Feature is a server feature relevant to the library.
type Feature struct {
	Name      string `json:"name"`
	Since     string `json:"since"`
	Available bool   `json:"available"`
	Used      bool   `json:"used"` // used by this version of the library
}

// NodeReport is what doctor found on one node.
type NodeReport struct {
	Node            string          `json:"node"` // the URL, password masked
	Reachable       bool            `json:"reachable"`
	Error           string          `json:"error,omitempty"`
	Server          string          `json:"server,omitempty"` // redis or valkey
	Version         string          `json:"version,omitempty"`
	Mode            string          `json:"mode,omitempty"` // standalone, cluster, sentinel
	RunID           string          `json:"run_id,omitempty"`
	Role            string          `json:"role,omitempty"` // master or slave
	Replicas        int             `json:"replicas"`
	Master          string          `json:"master,omitempty"` // a replica's master host:port
	UptimeS         int64           `json:"uptime_s"`
	AOF             bool            `json:"appendonly"`
	Appendfsync     string          `json:"appendfsync,omitempty"`
	MaxMemory       int64           `json:"maxmemory"`
	MaxMemoryPolicy string          `json:"maxmemory_policy,omitempty"`
	Clock           *ClockReport    `json:"clock,omitempty"`
	Latency         *LatencyReport  `json:"latency,omitempty"`
	Features        []Feature       `json:"features,omitempty"`
	Register        *RegisterReport `json:"ttl_register,omitempty"` // the restart quarantine's TTL register (register.go)
	WaitAOF         string          `json:"waitaof"`                // "yes", or why a WAITAOF probe failed (WithDurableVotes)
	Hz              int             `json:"hz,omitempty"`
	Checks          []Check         `json:"checks"`
	Verdict         string          `json:"verdict"` // the worst of Checks

	info      map[string]string
	infoErr   string
	fsyncErr  string
	replID    string
	addr      string // host:port as dialled, loopback names made one (a replica's master is matched against it)
	unreached bool   // not reachable or refused the credentials: exit 3
}

// QuorumReport sums up the node set.
type QuorumReport struct {
	Nodes   int    `json:"nodes"`
	Needed  int    `json:"needed"`
	Sound   int    `json:"sound"` // nodes with no FAIL check
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
}

// DoctorSettings are what the checks were measured against.
type DoctorSettings struct {
	NodeTimeoutMs float64 `json:"node_timeout_ms"` // per-node call deadline: --node-timeout capped at TTL/10
	TTLms         int64   `json:"ttl_ms"`
	DriftFactor   float64 `json:"drift_factor"`
	Samples       int     `json:"samples"`
	WindowMs      int64   `json:"window_ms"`
}

// DoctorReport is the whole report (--json prints it).
type DoctorReport struct {
	Settings DoctorSettings `json:"settings"`
	Nodes    []NodeReport   `json:"nodes"`
	Quorum   QuorumReport   `json:"quorum"`
	Verdict  string         `json:"verdict"` // OK (warnings allowed), FAIL, or UNREACHABLE
	Failures int            `json:"failures"`
	Warnings int            `json:"warnings"`
}

type doctorConfig struct {
	nodeTimeout time.Duration // as given
	callTimeout time.Duration // capped at ttl/10, as the library does
	ttl         time.Duration
	drift       float64
	samples     int
	window      time.Duration
	quorum      int
	durable     bool // --durable: WithDurableVotes
	verbose     bool // -v: every check of every node
}

func doctorCmd(fs *flag.FlagSet) runner {
	nodes := nodeFlags(fs)
	nodeTimeout := fs.Duration("node-timeout", admin.DefaultNodeTimeout, "the Client's per-node timeout (WithNodeTimeout)")
	ttl := fs.Duration("ttl", 10*time.Second, "the lock TTL you use")
	drift := fs.Float64("drift-factor", admin.DefaultDriftFactor, "the Client's drift factor (Drift.Factor)")
	samples := fs.Int("samples", 20, "TIME and PING samples per node")
	window := fs.Duration("window", 2*time.Second, "time over which the samples are spread (longer resolves smaller clock-rate errors)")
	quorum := fs.Int("quorum", 0, "votes a lock needs (default: majority)")
	asJSON := fs.Bool("json", false, "print JSON")
	verbose := fs.Bool("v", false, "print every check of every node (default: one line per node and each finding that is not OK once)")
	durable := fs.Bool("durable", false, "the Client uses WithDurableVotes: a node that cannot confirm votes on disk is a FAIL")
	return func(_ []string, out, _ io.Writer) error {
		switch {
		case *nodeTimeout <= 0:
			return usageErr("--node-timeout %v must be positive", *nodeTimeout)
		case *ttl < time.Millisecond:
			return usageErr("--ttl %v must be at least 1ms", *ttl)
		case *drift < 0 || *drift >= 1 || math.IsNaN(*drift):
			return usageErr("--drift-factor %v must be in [0, 1)", *drift)
		case *ttl <= admin.DriftBudget(*ttl, *drift):
			return usageErr("--ttl %v is not longer than its drift budget %v", *ttl, admin.DriftBudget(*ttl, *drift))
		case *samples < 3 || *samples > 10000:
			return usageErr("--samples %d must be in 3-10000", *samples)
		case *window < 10*time.Millisecond:
			return usageErr("--window %v must be at least 10ms", *window)
		}
		urls, err := nodes.urls()
		if err != nil {
			return err
		}
		opts := make([]*redis.Options, len(urls))
		shown := make([]string, len(urls))
		for i, u := range urls {
			var err error
			if opts[i], shown[i], err = doctorParseURL(u); err != nil {
				return err
			}
		}
		q := *quorum
		if q == 0 {
			q = len(urls)/2 + 1
		}
		if q <= len(urls)/2 || q > len(urls) {
			return usageErr("--quorum %d is out of range for %d nodes", q, len(urls))
		}
		cfg := doctorConfig{nodeTimeout: *nodeTimeout, callTimeout: *nodeTimeout, ttl: *ttl, drift: *drift,
			samples: *samples, window: *window, quorum: q, durable: *durable}
		if t := *ttl / 10; t < cfg.callTimeout {
			cfg.callTimeout = t
		}

		cfg.verbose = *verbose
		return report(out, doctor(context.Background(), opts, shown, cfg), cfg, *asJSON)
	}
}

// report prints the doctor's report and returns the error that sets the
// exit code: exit 3 when a node was unusable, 1 on a failed check.
func report(out io.Writer, rep DoctorReport, cfg doctorConfig, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printDoctor(out, rep, cfg)
	}
	var unreached []string
	for _, n := range rep.Nodes {
		if n.unreached {
			unreached = append(unreached, n.Node+": "+n.Error)
		}
	}
	if len(unreached) > 0 {
		return &exitError{exitUnreachable, fmt.Errorf("nodes not usable:\n  %s", strings.Join(unreached, "\n  "))}
	}
	if rep.Failures > 0 {
		return fmt.Errorf("%s (%s)", plural(rep.Failures, "failed check"), plural(rep.Warnings, "warning"))
	}
	return nil
}

// doctorParseURL parses a node URL as the library's NewFromURLs does
// (parseURL) and returns the options doctor dials with and the URL to
// show, its password masked.
func doctorParseURL(s string) (*redis.Options, string, error) {
	o, err := parseURL(s)
	if err != nil {
		return nil, "", err
	}
	o.ContextTimeoutEnabled = true
	o.DialTimeout = doctorCallTimeout
	o.MaxRetries = -1
	o.DialerRetries = 1 // a node that does not answer is reported, not redialled
	o.PoolSize = 2
	return o, admin.MaskURL(s), nil
}

// doctor examines every node at once (the clock sampling takes the whole
// window on each) and judges the set.
func doctor(ctx context.Context, opts []*redis.Options, shown []string, cfg doctorConfig) DoctorReport {
	rep := DoctorReport{
		Settings: DoctorSettings{
			NodeTimeoutMs: float64(cfg.callTimeout) / float64(time.Millisecond),
			TTLms:         cfg.ttl.Milliseconds(),
			DriftFactor:   cfg.drift,
			Samples:       cfg.samples,
			WindowMs:      cfg.window.Milliseconds(),
		},
		Nodes: make([]NodeReport, len(opts)),
	}
	var wg sync.WaitGroup
	for i := range opts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := redis.NewClient(opts[i])
			defer c.Close()
			rep.Nodes[i] = examine(ctx, c, shown[i], cfg)
			if opts[i].Network != "unix" {
				rep.Nodes[i].addr = sameHost(opts[i].Addr)
			}
		}()
	}
	wg.Wait()
	judge(&rep, cfg)
	return rep
}

// examine gathers what one node says about itself and measures its clock
// and round trips. Judging is left to judge, which needs every node.
func examine(ctx context.Context, c *redis.Client, name string, cfg doctorConfig) NodeReport {
	n := NodeReport{Node: name}
	call := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, doctorCallTimeout) }

	cctx, cancel := call()
	err := c.Ping(cctx).Err()
	cancel()
	if err != nil {
		n.Error, n.unreached = explainNode(err), true
		return n
	}
	n.Reachable = true

	// INFO without a section (the default ones) works on every version;
	// several sections in one INFO need 7.0.
	cctx, cancel = call()
	info, err := c.Info(cctx).Result()
	cancel()
	if err != nil {
		if unusable(err) {
			n.Reachable, n.Error, n.unreached = false, "INFO: "+explainNode(err), true
			return n
		}
		n.infoErr = "INFO refused: " + err.Error()
	}
	n.info = parseInfo(info)
	in := n.info
	n.Server, n.Version = serverVersion(in)
	n.Mode = in["redis_mode"]
	if in["cluster_enabled"] == "1" {
		n.Mode = "cluster"
	}
	n.RunID = in["run_id"]
	n.Role = in["role"]
	n.Replicas, _ = strconv.Atoi(in["connected_slaves"])
	if h := in["master_host"]; h != "" {
		n.Master = h + ":" + in["master_port"]
	}
	n.replID = in["master_replid"]
	n.UptimeS, _ = strconv.ParseInt(in["uptime_in_seconds"], 10, 64)
	n.AOF = in["aof_enabled"] == "1"
	n.MaxMemory, _ = strconv.ParseInt(in["maxmemory"], 10, 64)
	n.MaxMemoryPolicy = in["maxmemory_policy"]

	// appendfsync is not in INFO. CONFIG may be refused (ACL) or renamed
	// (managed services): the check then says what it could not read.
	if n.MaxMemoryPolicy == "" {
		if v, err := configGet(ctx, c, "maxmemory-policy"); err == nil {
			n.MaxMemoryPolicy = v
		}
		if v, err := configGet(ctx, c, "maxmemory"); err == nil {
			n.MaxMemory, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	if v, err := configGet(ctx, c, "appendfsync"); err == nil {
		n.Appendfsync = v
	} else {
		if unusable(err) {
			n.Reachable, n.Error, n.unreached = false, "CONFIG GET: "+explainNode(err), true
			return n
		}
		n.fsyncErr = err.Error()
	}
	if n.infoErr != "" {
		if v, err := configGet(ctx, c, "appendonly"); err == nil {
			n.AOF = v == "yes"
		}
	}

	n.Register = readRegisterReport(ctx, c)
	n.WaitAOF = probeWaitAOF(ctx, c)
	n.Hz, _ = strconv.Atoi(in["hz"])
	n.Latency, n.Clock = sample(ctx, c, cfg)
	return n
}

// probeWaitAOF tries WAITAOF 1 0 100 on c: "yes" when the node answers
// (it has WAITAOF and appendonly on; a connection that wrote nothing
// returns at once), else the node's error.
func probeWaitAOF(ctx context.Context, c *redis.Client) string {
	cctx, cancel := context.WithTimeout(ctx, doctorCallTimeout)
	defer cancel()
	if _, err := c.Do(cctx, "waitaof", 1, 0, 100).Result(); err != nil {
		return err.Error()
	}
	return "yes"
}

// durableCheck says whether WithDurableVotes can be used with the node: a
// FAIL with --durable (the Client would count none of its votes), else
// information.
func durableCheck(n *NodeReport, required bool, timeout time.Duration) Check {
	if n.WaitAOF != "yes" {
		v := verdictInfo
		if required {
			v = verdictFail
		}
		return Check{checkDurable, v, "no: WAITAOF refused (" + n.WaitAOF + "); it needs Redis 7.2+ or Valkey 8.0+ with appendonly yes, and WithDurableVotes counts no vote of this node"}
	}
	if n.Appendfsync == "everysec" {
		// Valkey fsyncs for a waiting WAITAOF on its cron (1/hz); Redis
		// waits for its once-a-second fsync.
		wait, why, fix := time.Second, "Redis's once-a-second fsync", "use appendfsync always"
		if n.Server == "valkey" && n.Hz > 0 {
			wait, why, fix = time.Second/time.Duration(n.Hz), fmt.Sprintf("about 1/hz (hz %d)", n.Hz), "raise hz (CONFIG SET hz 100) or the node timeout"
		}
		v, more := verdictOK, ""
		if wait >= timeout {
			if required {
				v = verdictFail
			}
			more = fmt.Sprintf("; that is not under the node timeout %v: %s", timeout, fix)
		}
		return Check{checkDurable, v, fmt.Sprintf("yes (WAITAOF): under appendfsync everysec each durable vote waits for the next fsync, %s: up to %v%s", why, wait, more)}
	}
	return Check{checkDurable, verdictOK, "yes (WAITAOF, appendfsync " + n.Appendfsync + "): WithDurableVotes can be used"}
}

// explainNode is explain, and says when the other end is not Redis.
func explainNode(err error) string {
	if s := err.Error(); strings.Contains(s, "can't parse") || strings.Contains(s, "HTTP/") {
		return "not a Redis server (" + s + ")"
	}
	return explain(err)
}

// unusable says whether err means the node cannot be talked to at all
// (gone, or the credentials refused), rather than one command refused.
func unusable(err error) bool {
	s := err.Error()
	for _, w := range []string{"WRONGPASS", "NOAUTH", "invalid password", "connection refused", "deadline exceeded", "timeout", "EOF", "connection reset", "broken pipe", "closed"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

func configGet(ctx context.Context, c *redis.Client, name string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, doctorCallTimeout)
	defer cancel()
	m, err := c.ConfigGet(cctx, name).Result()
	if err != nil {
		return "", err
	}
	v, ok := m[name]
	if !ok {
		return "", fmt.Errorf("CONFIG GET %s: no such parameter", name)
	}
	return v, nil
}

// parseInfo is admin.InfoFields, the one INFO parser of the project.
func parseInfo(s string) map[string]string { return admin.InfoFields(s) }

// serverVersion reads the server and version from INFO server: Valkey 8+
// shows valkey_version (its redis_version stays 7.2.4 for clients that
// check it), earlier Valkey only server_name.
func serverVersion(in map[string]string) (server, version string) {
	if v := in["valkey_version"]; v != "" {
		return "valkey", v
	}
	if in["server_name"] == "valkey" {
		return "valkey", in["redis_version"]
	}
	if v := in["redis_version"]; v != "" {
		return "redis", v
	}
	return "", ""
}

// timeSample is one TIME answer: the library's drift sample (client send
// time since the first send, on the client's monotonic clock; the node's
// TIME; the round trip) and the wall-clock offset, which only doctor uses.
type timeSample struct {
	admin.ClockSample
	offset time.Duration // node time − client wall time at the round trip's midpoint
}

// sample sends cfg.samples rounds of PING and TIME spread over cfg.window.
func sample(ctx context.Context, c *redis.Client, cfg doctorConfig) (*LatencyReport, *ClockReport) {
	var pings []time.Duration
	var times []timeSample
	start := time.Now()
	// A node that stops answering is not waited on for every sample: after
	// three rounds without an answer the rest count as failed.
	for i, silent := 0, 0; i < cfg.samples && silent < 3; i++ {
		if i > 0 {
			time.Sleep(time.Until(start.Add(cfg.window * time.Duration(i) / time.Duration(cfg.samples-1))))
		}
		cctx, cancel := context.WithTimeout(ctx, doctorCallTimeout)
		t0 := time.Now()
		err := c.Ping(cctx).Err()
		rtt := time.Since(t0)
		if err == nil {
			pings = append(pings, rtt)
		}
		answered := err == nil
		// time.Now carries a monotonic reading: Sub and Since between two
		// such times use it (elapsed time); the node's time has none, so
		// nt.Sub(mid) compares wall clocks (the offset).
		t1 := time.Now()
		nt, err := c.Time(cctx).Result()
		r := time.Since(t1)
		cancel()
		if err == nil {
			mid := t1.Add(r / 2)
			times = append(times, timeSample{admin.ClockSample{Client: t1.Sub(start), Node: nt, RTT: r}, nt.Sub(mid)})
			answered = true
		}
		if answered {
			silent = 0
		} else {
			silent++
		}
	}
	lat := &LatencyReport{Pings: cfg.samples, Failed: cfg.samples - len(pings)}
	if len(pings) > 0 {
		sort.Slice(pings, func(i, j int) bool { return pings[i] < pings[j] })
		lat.P50Ms = ms(pings[(len(pings)-1)/2])
		lat.P99Ms = ms(pings[int(math.Ceil(0.99*float64(len(pings))))-1])
		lat.MaxMs = ms(pings[len(pings)-1])
	}
	return lat, fitClock(times, cfg.drift)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fitClock estimates the node's clock rate against the client's monotonic
// clock with the library's drift estimator (the one the drift monitor,
// WithDrift, runs continuously), over all samples at once: its rate error and the bound
// that surely holds the true one. A jump restarts the estimator's window,
// so the rate is over the samples since the last jump. It returns nil
// unless two samples give a rate (three samples at least).
func fitClock(all []timeSample, budget float64) *ClockReport {
	if len(all) < 3 {
		return nil
	}
	cs := make([]admin.ClockSample, len(all))
	for i, s := range all {
		cs[i] = s.ClockSample
	}
	e, err := admin.EstimateDrift(cs)
	if err != nil || !e.Known { // sample sends are in order: err is not reached
		return nil
	}
	used := all[len(all)-e.Samples:]
	first, last := used[0], used[len(used)-1]
	best := used[0]
	for _, s := range used {
		if s.RTT < best.RTT {
			best = s
		}
	}
	return &ClockReport{
		Samples:        len(used),
		WindowMs:       ms(last.Client + last.RTT/2 - first.Client - first.RTT/2), // midpoint to midpoint
		OffsetMs:       ms(best.offset),
		OffsetErrMs:    ms(best.RTT / 2),
		RateErrorPPM:   e.Error * 1e6,
		ResolutionPPM:  e.Bound * 1e6,
		MaxResidualUs:  maxResidual(used, e.Rate),
		DriftBudgetPPM: budget * 1e6,
		Jumps:          e.Jumps,
		StepsBack:      stepsBack(all),
	}
}

// maxResidual is the largest distance, in µs, of a sample's node time from
// the line of slope rate (node seconds per client second) through the
// samples' mean, the midpoints taken as the client times.
func maxResidual(ss []timeSample, rate float64) float64 {
	x := func(s timeSample) float64 { return (s.Client + s.RTT/2 - ss[0].Client).Seconds() }
	y := func(s timeSample) float64 { return s.Node.Sub(ss[0].Node).Seconds() }
	var mx, my float64
	for _, s := range ss {
		mx += x(s) / float64(len(ss))
		my += y(s) / float64(len(ss))
	}
	var m float64
	for _, s := range ss {
		m = math.Max(m, math.Abs(y(s)-(my+rate*(x(s)-mx))))
	}
	return m * 1e6
}

// stepsBack counts the samples whose node time is below the previous
// sample's, in the order they were taken.
func stepsBack(ss []timeSample) int {
	n := 0
	for i := 1; i < len(ss); i++ {
		if ss[i].Node.Before(ss[i-1].Node) {
			n++
		}
	}
	return n
}

// skews sets each node's SkewMs: the largest difference between its clock
// offset and another node's, less both offsets' errors. The nodes were
// sampled at once against one client clock, so offsets compare.
func skews(nodes []NodeReport) {
	for i := range nodes {
		a := nodes[i].Clock
		if a == nil {
			continue
		}
		for j := range nodes {
			b := nodes[j].Clock
			if j == i || b == nil {
				continue
			}
			d := math.Abs(a.OffsetMs-b.OffsetMs) - a.OffsetErrMs - b.OffsetErrMs
			a.SkewMs = math.Max(a.SkewMs, d)
		}
	}
}

// fenceClockCheck adds to a node's clock check what fencing tokens
// (redlock.WithFencing) assume of node clocks: that they do not step back
// and differ by less than admin.FenceMargin. Half the margin already
// warns.
func fenceClockCheck(c Check, r *ClockReport) Check {
	if r == nil {
		return c
	}
	var why []string
	if r.StepsBack > 0 {
		why = append(why, fmt.Sprintf("the node's clock stepped back %d times while sampled", r.StepsBack))
	}
	if limit := ms(admin.FenceMargin) / 2; r.SkewMs > limit {
		why = append(why, fmt.Sprintf("the node's clock differs from another node's by more than %s (at least %s)", time.Duration(limit*float64(time.Millisecond)), fmtMs(r.SkewMs)))
	}
	if len(why) == 0 {
		return c
	}
	c.Verdict = worse(c.Verdict, verdictWarn)
	c.Reason += "; " + strings.Join(why, ", ") + fmt.Sprintf(": fencing tokens (WithFencing) assume node clocks never step back and differ by less than %v; fix the time sync", admin.FenceMargin)
	return c
}

// judge runs the checks on every node and sums up the set.
func judge(rep *DoctorReport, cfg doctorConfig) {
	byRunID := map[string][]int{}
	for i, n := range rep.Nodes {
		if n.Reachable && n.RunID != "" {
			byRunID[n.RunID] = append(byRunID[n.RunID], i)
		}
	}
	skews(rep.Nodes)
	for i := range rep.Nodes {
		n := &rep.Nodes[i]
		if !n.Reachable {
			n.Checks = []Check{{checkConnect, verdictFail, n.Error}}
			n.Verdict = verdictFail
			continue
		}
		var same, group []string
		for _, j := range byRunID[n.RunID] {
			if j != i {
				same = append(same, rep.Nodes[j].Node)
			}
		}
		for j, m := range rep.Nodes {
			if j == i || !m.Reachable || m.RunID == n.RunID {
				continue
			}
			sameGroup := n.replID != "" && m.replID == n.replID
			myMaster := n.Role == "slave" && m.addr != "" && sameHost(n.Master) == m.addr
			myReplica := m.Role == "slave" && n.addr != "" && sameHost(m.Master) == n.addr
			if sameGroup || myMaster || myReplica {
				group = append(group, m.Node)
			}
		}
		var ver Check
		ver, n.Features = versionCheck(n.Server, n.Version, n.infoErr)
		n.Checks = []Check{
			roleCheck(n, group),
			distinctCheck(n, same),
			persistenceCheck(n),
			uptimeCheck(n, cfg.ttl),
			evictionCheck(n),
			fenceClockCheck(clockCheck(n.Clock, cfg.drift), n.Clock),
			latencyCheck(n.Latency, cfg),
			ver,
			durableCheck(n, cfg.durable, cfg.callTimeout),
			restartWindowCheck(rep.Nodes, i),
		}
		n.Verdict = verdictOK
		for _, c := range n.Checks {
			n.Verdict = worse(n.Verdict, c.Verdict)
		}
	}
	q := QuorumReport{Nodes: len(rep.Nodes), Needed: cfg.quorum}
	rep.Verdict = verdictOK
	for _, n := range rep.Nodes {
		if n.Verdict != verdictFail {
			q.Sound++
		}
		for _, c := range n.Checks {
			switch c.Verdict {
			case verdictFail:
				rep.Failures++
			case verdictWarn:
				rep.Warnings++
			}
		}
	}
	spare := q.Sound - q.Needed
	head := fmt.Sprintf("%d of %d nodes pass every check that can fail; a lock needs %d", q.Sound, q.Nodes, q.Needed)
	switch {
	case spare < 0:
		q.Verdict, q.Reason = verdictFail, head+": locks on this set are unavailable or unsafe until the failing nodes are fixed"
	case q.Sound < q.Nodes && spare == 0:
		q.Verdict, q.Reason = verdictWarn, head+": locks still work, but one more node down stops them"
	case q.Sound < q.Nodes:
		q.Verdict, q.Reason = verdictWarn, head+fmt.Sprintf(": locks still work and %d more nodes may go down; fix the failing ones", spare)
	case spare == 0:
		q.Verdict, q.Reason = verdictWarn, head+": no node may go down (use 3 or 5 nodes for fault tolerance)"
	default:
		q.Verdict, q.Reason = verdictOK, head+fmt.Sprintf(": %d may go down", spare)
	}
	switch q.Verdict {
	case verdictFail:
		rep.Failures++
	case verdictWarn:
		rep.Warnings++
	}
	rep.Quorum = q
	if rep.Failures > 0 {
		rep.Verdict = verdictFail
	}
	for _, n := range rep.Nodes {
		if n.unreached {
			rep.Verdict = "UNREACHABLE"
		}
	}
}

// sameHost writes host:port with the loopback names (localhost,
// 127.0.0.1, ::1) made one.
func sameHost(addr string) string {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if h == "localhost" || h == "::1" || strings.HasPrefix(h, "127.") {
		h = "loopback"
	}
	return strings.ToLower(h) + ":" + p
}

func worse(a, b string) string {
	rank := map[string]int{verdictOK: 0, verdictInfo: 0, verdictWarn: 1, verdictFail: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

func notChecked(name, why string) Check {
	return Check{name, verdictWarn, "not checked: " + why}
}

func roleCheck(n *NodeReport, group []string) Check {
	if n.infoErr != "" {
		return notChecked(checkRole, n.infoErr)
	}
	var c Check
	switch {
	case n.Mode == "sentinel":
		return Check{checkRole, verdictFail, "a Sentinel, not a data node: give the URLs of the masters it watches"}
	case n.Role == "slave":
		link := n.info["master_link_status"]
		c = Check{checkRole, verdictFail, fmt.Sprintf("replica of %s (link %s): it refuses lock writes or loses them at the next sync, and votes with its master's data; give independent masters", n.Master, link)}
		if len(group) > 0 {
			c.Reason += "; its replication group includes " + strings.Join(group, ", ") + " of this set"
		}
	case n.Role == "master" && n.Replicas > 0:
		c = Check{checkRole, verdictWarn, fmt.Sprintf("master with %d replica(s): fine for availability, but a fail-over to a replica that had not yet received a lock forgets it", n.Replicas)}
		if len(group) > 0 {
			c.Reason += "; its replication group includes " + strings.Join(group, ", ") + " of this set"
		}
	case n.Role == "master":
		c = Check{checkRole, verdictOK, "master, no replicas"}
	default:
		return Check{checkRole, verdictWarn, fmt.Sprintf("unknown role %q", n.Role)}
	}
	if n.Mode == "cluster" {
		c.Reason += "; cluster mode: this URL reaches one shard (keys of other slots answer MOVED): give the library a cluster client (redlock.New), one cluster per vote"
	}
	return c
}

func distinctCheck(n *NodeReport, same []string) Check {
	switch {
	case n.infoErr != "":
		return notChecked(checkDistinct, n.infoErr)
	case n.RunID == "":
		return Check{checkDistinct, verdictWarn, "no run_id in INFO: cannot tell whether another URL reaches this server"}
	case len(same) > 0:
		return Check{checkDistinct, verdictFail, fmt.Sprintf("same server as %s (run_id %s): one server would cast two votes; give each URL its own server", strings.Join(same, ", "), short(n.RunID))}
	}
	return Check{checkDistinct, verdictOK, "run_id " + short(n.RunID) + " reached by no other URL"}
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// quarantineNote is the persistence advice for locks and for fencing
// tokens. Fence registers expire (a lock's TTL plus admin.FenceMargin
// after each write, see redlock.WithFencing), but outlive the quarantine:
// a restart that loses them leaves tokens to the node-clock floor.
var quarantineNote = "or keep restart quarantine on (the library's default: a restarted node does not vote for one TTL); " +
	"fencing tokens (WithFencing): a restart without it loses the fence registers (each lives the lock's TTL plus " + admin.FenceMargin.String() +
	" after its last write, longer than the quarantine), and tokens then rest on the node-clock floor alone: keep node clocks in sync, or use appendfsync always"

func persistenceCheck(n *NodeReport) Check {
	switch {
	case n.infoErr != "" && n.fsyncErr != "":
		return notChecked(checkPersistence, n.infoErr)
	case !n.AOF:
		return Check{checkPersistence, verdictWarn, "appendonly no: a restart forgets every lock it granted (RDB snapshots are too far apart); set appendonly yes and appendfsync always, " + quarantineNote}
	case n.fsyncErr != "":
		return Check{checkPersistence, verdictWarn, "appendonly yes, appendfsync unknown (CONFIG GET refused: " + n.fsyncErr + "): make sure it is always"}
	case n.Appendfsync == "always":
		return Check{checkPersistence, verdictOK, "appendonly yes, appendfsync always: every lock is on disk before the node says yes"}
	case n.Appendfsync == "everysec":
		return Check{checkPersistence, verdictWarn, "appendfsync everysec: a crash or power loss forgets up to 1s of locks; set appendfsync always, " + quarantineNote}
	}
	return Check{checkPersistence, verdictWarn, fmt.Sprintf("appendfsync %s: the OS decides when locks reach the disk, a crash forgets them; set appendfsync always, %s", n.Appendfsync, quarantineNote)}
}

func uptimeCheck(n *NodeReport, ttl time.Duration) Check {
	if n.infoErr != "" {
		return notChecked(checkUptime, n.infoErr)
	}
	up := time.Duration(n.UptimeS) * time.Second
	durable := n.AOF && n.Appendfsync == "always"
	switch {
	case up >= ttl:
		return Check{checkUptime, verdictOK, fmt.Sprintf("up %v, more than one TTL (%v)", up, ttl)}
	case durable:
		return Check{checkUptime, verdictOK, fmt.Sprintf("up %v, less than one TTL (%v), but fsync-always persistence kept the locks it granted", up, ttl)}
	}
	return Check{checkUptime, verdictWarn, fmt.Sprintf("up only %v, less than one TTL (%v), without fsync-always persistence: it may have forgotten locks that are still held; keep it out of quorums for another %v", up, ttl, ttl-up)}
}

func evictionCheck(n *NodeReport) Check {
	p := n.MaxMemoryPolicy
	switch {
	case p == "" && n.infoErr != "":
		return notChecked(checkEviction, n.infoErr)
	case p == "":
		return Check{checkEviction, verdictWarn, "maxmemory-policy unknown (not in INFO, CONFIG GET refused)"}
	case n.MaxMemory == 0 && strings.HasPrefix(p, "allkeys-"):
		return Check{checkEviction, verdictOK, "no maxmemory: nothing is evicted (but " + p + " would evict held locks once maxmemory is set: prefer noeviction)"}
	case n.MaxMemory == 0:
		return Check{checkEviction, verdictOK, "no maxmemory: nothing is evicted (policy " + p + ")"}
	case strings.HasPrefix(p, "allkeys-") || strings.HasPrefix(p, "volatile-"):
		return Check{checkEviction, verdictFail, fmt.Sprintf("maxmemory-policy %s with maxmemory %s: when memory is full a held lock's key (it has a TTL) can be evicted; the node then does not vote until no lock it may have dropped can be held; set noeviction (a full node then refuses new locks instead)", p, fmtBytes(n.MaxMemory))}
	case p == "noeviction":
		return Check{checkEviction, verdictOK, fmt.Sprintf("noeviction (maxmemory %s): a full node refuses new locks, never drops held ones", fmtBytes(n.MaxMemory))}
	}
	return Check{checkEviction, verdictWarn, fmt.Sprintf("unknown maxmemory-policy %q with maxmemory %s: make sure it never evicts keys with a TTL", p, fmtBytes(n.MaxMemory))}
}

func clockCheck(c *ClockReport, drift float64) Check {
	if c == nil {
		return Check{checkClock, verdictWarn, "not measured: fewer than 3 TIME samples answered"}
	}
	rate := math.Abs(c.RateErrorPPM)
	budget := drift * 1e6
	dir := "none resolved"
	switch {
	case rate <= c.ResolutionPPM:
	case c.RateErrorPPM > 0:
		dir = "node fast: expires keys early"
	default:
		dir = "node slow: keeps keys longer"
	}
	nums := fmt.Sprintf("rate error %+.0f ppm ±%.0f ppm over %.1fs, %d samples (%s); budget %.0f ppm (drift factor %g); offset %s ±%s (informative: expiry runs on the node's own clock)",
		c.RateErrorPPM, c.ResolutionPPM, c.WindowMs/1000, c.Samples, dir, budget, drift, fmtSignedMs(c.OffsetMs), fmtMs(c.OffsetErrMs))
	switch {
	case rate-c.ResolutionPPM > budget:
		return Check{checkClock, verdictFail, nums + ": the node's clock runs outside the drift budget; fix its time sync or raise the drift factor"}
	case c.ResolutionPPM >= budget/2:
		return Check{checkClock, verdictWarn, nums + fmt.Sprintf(": the window cannot resolve the budget; sample longer (--window %v)", suggestWindow(c, budget))}
	case rate > budget:
		return Check{checkClock, verdictFail, nums + ": the node's clock runs outside the drift budget; fix its time sync or raise the drift factor"}
	case rate > budget/2:
		return Check{checkClock, verdictWarn, nums + ": more than half the drift budget"}
	case c.Jumps > 0:
		return Check{checkClock, verdictWarn, nums + fmt.Sprintf(": the node's clock jumped %d times while sampled (the rate is over the samples since); the drift monitor (WithDrift) counts such a node out of bounds until its rate is known again", c.Jumps)}
	}
	return Check{checkClock, verdictOK, nums}
}

// suggestWindow is a window long enough to resolve a quarter of the budget.
func suggestWindow(c *ClockReport, budget float64) time.Duration {
	if budget <= 0 {
		return time.Minute
	}
	w := time.Duration(c.WindowMs * c.ResolutionPPM / (budget / 4) * float64(time.Millisecond))
	return w.Round(time.Second) + time.Second
}

func latencyCheck(l *LatencyReport, cfg doctorConfig) Check {
	if l == nil || l.Pings == l.Failed {
		return Check{checkLatency, verdictFail, "no PING answered"}
	}
	timeout := cfg.callTimeout
	shown := timeout.String()
	if cfg.callTimeout < cfg.nodeTimeout {
		shown += fmt.Sprintf(" (--node-timeout %v capped at TTL/10)", cfg.nodeTimeout)
	}
	nums := fmt.Sprintf("PING p50 %s, p99 %s, max %s (%d pings) vs node timeout %s",
		fmtMs(l.P50Ms), fmtMs(l.P99Ms), fmtMs(l.MaxMs), l.Pings, shown)
	half := ms(timeout) / 2
	switch {
	case l.Failed > 0:
		return Check{checkLatency, verdictFail, nums + fmt.Sprintf(": %d pings failed", l.Failed)}
	case l.P50Ms > ms(timeout):
		return Check{checkLatency, verdictFail, nums + ": most calls would time out; raise --node-timeout (WithNodeTimeout) or move the node closer"}
	case l.P99Ms > half || l.MaxMs > half:
		return Check{checkLatency, verdictWarn, nums + ": the slow tail is past half the timeout; some calls will time out under load"}
	}
	return Check{checkLatency, verdictOK, nums}
}

func fmtSignedMs(v float64) string {
	d := time.Duration(v * float64(time.Millisecond)).Round(time.Microsecond)
	switch {
	case d < 0:
		return "-" + (-d).String()
	case d > 0:
		return "+" + d.String()
	}
	return "0s"
}

// fmtBytes shows a maxmemory setting.
func fmtBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dgb", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dmb", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dkb", n>>10)
	}
	return strconv.FormatInt(n, 10)
}

func fmtMs(v float64) string {
	return time.Duration(v * float64(time.Millisecond)).Round(time.Microsecond).String()
}

// featureSpecs are the server features relevant to the library: since
// which Redis and Valkey version ("" everywhere, "-" never), and whether
// this version of the library uses them.
var featureSpecs = []struct {
	redisName, valkeyName string
	redis, valkey         string
	used                  bool
}{
	{"Lua/EVALSHA", "Lua/EVALSHA", "", "", true},
	{"pub/sub hand-off", "pub/sub hand-off", "", "", true},
	{"WAITAOF", "WAITAOF", "7.2", "", true},
	{"HEXPIRE", "HEXPIRE", "7.4", "9.0", false},
	{"SET IFEQ", "SET IFEQ", "8.4", "8.1", false},
	{"DELEX", "DELIFEQ", "8.4", "9.0", false},
}

func versionCheck(server, version, infoErr string) (Check, []Feature) {
	if version == "" {
		if infoErr != "" {
			return Check{checkVersion, verdictInfo, "not checked: " + infoErr}, nil
		}
		return Check{checkVersion, verdictInfo, "no version in INFO"}, nil
	}
	have := parseVersion(version)
	var fs []Feature
	var parts []string
	for _, f := range featureSpecs {
		name, since := f.redisName, f.redis
		if server == "valkey" {
			name, since = f.valkeyName, f.valkey
		}
		ok := since == "" || versionAtLeast(have, parseVersion(since))
		ff := Feature{Name: name, Since: since, Available: ok, Used: f.used}
		if since == "" {
			ff.Since = "all"
		}
		fs = append(fs, ff)
		switch {
		case ok:
			parts = append(parts, name+" yes")
		default:
			parts = append(parts, fmt.Sprintf("%s no (%s+)", name, since))
		}
	}
	label := "Redis"
	if server == "valkey" {
		label = "Valkey"
	}
	return Check{checkVersion, verdictOK, fmt.Sprintf("%s %s: %s; the library needs only Lua and pub/sub", label, version, strings.Join(parts, ", "))}, fs
}

func parseVersion(s string) [3]int {
	var v [3]int
	for i, p := range strings.SplitN(s, ".", 3) {
		// "7.2.4-rc1": digits up to the first non-digit
		end := 0
		for end < len(p) && p[end] >= '0' && p[end] <= '9' {
			end++
		}
		v[i], _ = strconv.Atoi(p[:end])
	}
	return v
}

func versionAtLeast(have, want [3]int) bool {
	for i := range have {
		if have[i] != want[i] {
			return have[i] > want[i]
		}
	}
	return true
}

func printDoctor(out io.Writer, rep DoctorReport, cfg doctorConfig) {
	fmt.Fprintf(out, "redlock doctor: %d nodes, quorum %d, TTL %v, node timeout %v, drift factor %g; %d samples per node over %v\n\n",
		len(rep.Nodes), cfg.quorum, cfg.ttl, cfg.callTimeout, cfg.drift, cfg.samples, cfg.window)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	if cfg.verbose {
		fmt.Fprintln(tw, "NODE\tCHECK\tVERDICT\tDETAIL")
		for _, n := range rep.Nodes {
			for _, c := range n.Checks {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", n.Node, c.Check, c.Verdict, c.Reason)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", "(all)", "quorum", rep.Quorum.Verdict, rep.Quorum.Reason)
		tw.Flush()
	} else {
		printBrief(out, tw, rep)
	}
	fmt.Fprintln(out)
	var line string
	switch rep.Verdict {
	case verdictOK:
		line = "OK"
		if rep.Warnings > 0 {
			line += " with " + plural(rep.Warnings, "warning")
		}
	case verdictFail:
		line = fmt.Sprintf("FAIL: %s, %s", plural(rep.Failures, "failed check"), plural(rep.Warnings, "warning"))
	default:
		line = fmt.Sprintf("UNREACHABLE: a node could not be checked; %s, %s", plural(rep.Failures, "failed check"), plural(rep.Warnings, "warning"))
	}
	if !cfg.verbose {
		line += " (-v: every check of every node)"
	}
	fmt.Fprintln(out, "verdict: "+line)
}

// printBrief prints one line per node (its verdict, server, uptime, PING
// p50, clock rate error and the checks that are not OK), then each
// finding that is not OK once, with the nodes it was found on, then the
// quorum's line.
func printBrief(out io.Writer, tw *tabwriter.Writer, rep DoctorReport) {
	fmt.Fprintln(tw, "NODE\tVERDICT\tSERVER\tUP\tPING p50\tCLOCK\tFINDINGS")
	type finding struct {
		c     Check
		nodes []string
	}
	var fs []*finding
	at := map[Check]*finding{}
	for _, n := range rep.Nodes {
		var notOK []string
		for _, c := range n.Checks {
			if c.Verdict == verdictOK {
				continue
			}
			notOK = append(notOK, c.Check)
			if f := at[c]; f != nil {
				f.nodes = append(f.nodes, n.Node)
				continue
			}
			at[c] = &finding{c: c, nodes: []string{n.Node}}
			fs = append(fs, at[c])
		}
		server, up, ping, clock := "-", "-", "-", "-"
		if n.Version != "" {
			server = map[bool]string{true: "Valkey", false: "Redis"}[n.Server == "valkey"] + " " + n.Version
		}
		if n.Reachable && n.infoErr == "" {
			up = (time.Duration(n.UptimeS) * time.Second).String()
		}
		if n.Latency != nil && n.Latency.Pings > n.Latency.Failed {
			ping = fmtMs(n.Latency.P50Ms)
		}
		if n.Clock != nil {
			clock = fmt.Sprintf("%+.0f ppm", n.Clock.RateErrorPPM)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Node, n.Verdict, server, up, ping, clock, strings.Join(notOK, ", "))
	}
	tw.Flush()
	fmt.Fprintln(out)
	for _, f := range fs {
		where := strings.Join(f.nodes, ", ")
		if len(f.nodes) == len(rep.Nodes) && len(f.nodes) > 1 {
			where = fmt.Sprintf("all %d nodes", len(f.nodes))
		}
		fmt.Fprintf(out, "%s %s on %s: %s\n", f.c.Verdict, f.c.Check, where, f.c.Reason)
	}
	fmt.Fprintf(out, "%s quorum: %s\n", rep.Quorum.Verdict, rep.Quorum.Reason)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
