package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/admin"
	"github.com/redlock-go/redlock/cmd/internal/localredis"
)

// redisNode starts a redis-server process with extra arguments (the
// defaults of localredis.Start come first, so args override them) and returns
// its URL. Doctor reads INFO and CONFIG, which the embedded nodes do not
// have: without redis-server the test is skipped.
func redisNode(t *testing.T, args ...string) string {
	t.Helper()
	u, _ := redisProc(t, args...)
	return u
}

func redisProc(t *testing.T, args ...string) (string, *localredis.Server) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not on PATH")
	}
	s, err := localredis.Start(bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s.URL(), s
}

func durableNode(t *testing.T) string {
	return redisNode(t, "--appendonly", "yes", "--appendfsync", "always")
}

func redisClient(t *testing.T, u string) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// fast keeps the clock sampling short where the test is not about it.
var fast = []string{"--samples", "4", "--window", "300ms"}

// doctorRun runs doctor -v (every check of every node, which row reads)
// on urls.
func doctorRun(t *testing.T, urls []string, extra ...string) (int, string, string) {
	t.Helper()
	args := append([]string{"doctor", "-v", "--nodes", strings.Join(urls, ",")}, extra...)
	return runCmd(t, args...)
}

// row finds the verdict and reason of one node's check in the table.
func row(t *testing.T, out, node, check string) (string, string) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(node) + `\s+` + check + `\s+(OK|INFO|WARN|FAIL)\s+(.*)$`)
	m := re.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %s row for %s:\n%s", check, node, out)
	}
	return m[1], m[2]
}

// Three independent masters with fsync-always persistence and no
// eviction: every check that does not depend on timing is OK, and the
// run exits 0. Clock and latency are checked for a verdict and numbers
// only (the machine may be loaded).
func TestDoctorHealthy(t *testing.T) {
	urls := []string{durableNode(t), durableNode(t), durableNode(t)}
	code, out, errOut := doctorRun(t, urls, "--node-timeout", "1s")
	if code != exitOK {
		t.Fatalf("exit %d, want 0\n%s%s", code, out, errOut)
	}
	for _, u := range urls {
		for _, c := range []string{checkRole, checkDistinct, checkPersistence, checkUptime, checkEviction, checkVersion} {
			if v, reason := row(t, out, u, c); v != verdictOK {
				t.Errorf("%s %s: %s %s", u, c, v, reason)
			}
		}
		_, reason := row(t, out, u, checkClock)
		if !regexp.MustCompile(`rate error [-+]\d+ ppm ±\d+ ppm over \d+\.\ds, \d+ samples`).MatchString(reason) || !strings.Contains(reason, "offset") {
			t.Errorf("%s clock row lacks the rate error and offset: %s", u, reason)
		}
		_, reason = row(t, out, u, checkLatency)
		if !regexp.MustCompile(`PING p50 \S+, p99 \S+, max \S+ \(20 pings\) vs node timeout 1s`).MatchString(reason) {
			t.Errorf("%s latency row: %s", u, reason)
		}
	}
	if v, reason := row(t, out, "(all)", "quorum"); v != verdictOK || !strings.Contains(reason, "3 of 3 nodes") {
		t.Errorf("quorum: %s %s", v, reason)
	}
	if !strings.Contains(out, "verdict: OK") {
		t.Errorf("no OK verdict line:\n%s", out)
	}
}

// Every policy that can evict a key with a TTL, with a maxmemory, can
// evict a held lock (lock keys always carry a TTL, so volatile-* evicts
// exactly them): FAIL, exit 1. A node without persistence warns.
func TestDoctorEviction(t *testing.T) {
	urls := []string{durableNode(t), durableNode(t), redisNode(t)}
	ctx := context.Background()
	for i, policy := range []string{"allkeys-lru", "volatile-lru"} {
		c := redisClient(t, urls[i])
		if err := c.ConfigSet(ctx, "maxmemory", "100mb").Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.ConfigSet(ctx, "maxmemory-policy", policy).Err(); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := doctorRun(t, urls, fast...)
	if code != exitFailure {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
	}
	if v, reason := row(t, out, urls[0], checkEviction); v != verdictFail || !strings.Contains(reason, "allkeys-lru") || !strings.Contains(reason, "100mb") {
		t.Errorf("allkeys-lru node: %s %s", v, reason)
	}
	if v, reason := row(t, out, urls[1], checkEviction); v != verdictFail || !strings.Contains(reason, "volatile-lru") {
		t.Errorf("volatile-lru node: %s %s", v, reason)
	}
	if v, _ := row(t, out, urls[2], checkEviction); v != verdictOK {
		t.Errorf("noeviction node: %s", v)
	}
	if v, reason := row(t, out, urls[2], checkPersistence); v != verdictWarn || !strings.Contains(reason, "appendonly no") || !strings.Contains(reason, "restart quarantine on") || !strings.Contains(reason, "fencing tokens") {
		t.Errorf("node without persistence: %s %s", v, reason)
	}
	// Started a moment ago without persistence: less than one TTL up.
	if v, reason := row(t, out, urls[2], checkUptime); v != verdictWarn || !strings.Contains(reason, "less than one TTL") {
		t.Errorf("fresh node without persistence: %s %s", v, reason)
	}
	if v, reason := row(t, out, "(all)", "quorum"); v != verdictFail || !strings.Contains(reason, "1 of 3 nodes") {
		t.Errorf("quorum: %s %s", v, reason)
	}
	if !strings.Contains(out, "verdict: FAIL") || !strings.Contains(errOut, "3 failed check") {
		t.Errorf("verdict line or error:\n%s%s", out, errOut)
	}
}

// One server under two URLs (127.0.0.1:P and localhost:P) would cast two
// votes: both rows FAIL, each naming the other.
func TestDoctorDuplicate(t *testing.T) {
	a, b := durableNode(t), durableNode(t)
	alias := strings.Replace(a, "127.0.0.1", "localhost", 1)
	code, out, errOut := doctorRun(t, []string{a, b, alias}, fast...)
	if code != exitFailure {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
	}
	if v, reason := row(t, out, a, checkDistinct); v != verdictFail || !strings.Contains(reason, "same server as "+alias) {
		t.Errorf("%s: %s %s", a, v, reason)
	}
	if v, reason := row(t, out, alias, checkDistinct); v != verdictFail || !strings.Contains(reason, "same server as "+a) {
		t.Errorf("%s: %s %s", alias, v, reason)
	}
	if v, _ := row(t, out, b, checkDistinct); v != verdictOK {
		t.Errorf("%s: %s", b, v)
	}
	if v, reason := row(t, out, "(all)", "quorum"); v != verdictFail || !strings.Contains(reason, "1 of 3 nodes") {
		t.Errorf("quorum: %s %s", v, reason)
	}
}

// A replica has no vote of its own: FAIL, naming its master in the set;
// the master, now with a replica, gets a warning.
func TestDoctorReplica(t *testing.T) {
	// No diskless-sync delay (5s by default): the replica syncs at once.
	master := redisNode(t, "--appendonly", "yes", "--appendfsync", "always", "--repl-diskless-sync-delay", "0")
	host, port, _ := strings.Cut(strings.TrimPrefix(master, "redis://"), ":")
	replica := redisNode(t, "--replicaof", host, port)
	other := durableNode(t)
	// Wait for the link, so the master counts its replica.
	rc := redisClient(t, replica)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(rc.Info(context.Background(), "replication").Val(), "master_link_status:up") {
		if time.Now().After(deadline) {
			t.Fatal("replica link not up after 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	code, out, errOut := doctorRun(t, []string{master, replica, other}, fast...)
	if code != exitFailure {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
	}
	if v, reason := row(t, out, replica, checkRole); v != verdictFail || !strings.Contains(reason, "replica of "+host+":"+port) || !strings.Contains(reason, master) {
		t.Errorf("replica: %s %s", v, reason)
	}
	if v, reason := row(t, out, master, checkRole); v != verdictWarn || !strings.Contains(reason, "1 replica") {
		t.Errorf("master: %s %s", v, reason)
	}
	if v, _ := row(t, out, other, checkRole); v != verdictOK {
		t.Errorf("independent master: %s", v)
	}
}

// A node that cannot be reached, or refuses the credentials, gets a
// connect FAIL row; the others are still checked, and the exit code is 3.
// Passwords never reach the output.
func TestDoctorUnreachable(t *testing.T) {
	good := durableNode(t)
	locked := redisNode(t)
	if err := redisClient(t, locked).ConfigSet(context.Background(), "requirepass", "s3cret").Err(); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := doctorRun(t, []string{good, "redis://127.0.0.1:1"}, fast...)
	if code != exitUnreachable {
		t.Fatalf("exit %d, want 3\n%s%s", code, out, errOut)
	}
	if v, reason := row(t, out, "redis://127.0.0.1:1", checkConnect); v != verdictFail || !strings.Contains(reason, "connection refused") {
		t.Errorf("dead node: %s %s", v, reason)
	}
	if v, _ := row(t, out, good, checkRole); v != verdictOK {
		t.Errorf("reachable node not checked: %s", v)
	}
	if !strings.Contains(out, "verdict: UNREACHABLE") || !strings.Contains(errOut, "connection refused") {
		t.Errorf("verdict line or error:\n%s%s", out, errOut)
	}

	wrong := strings.Replace(locked, "redis://", "redis://:wrong@", 1)
	code, out, errOut = doctorRun(t, []string{good, wrong}, fast...)
	if code != exitUnreachable || !strings.Contains(out+errOut, "authentication failed") || strings.Contains(out+errOut, ":wrong@") {
		t.Fatalf("wrong password: exit %d, want 3 with the password masked\n%s%s", code, out, errOut)
	}
	right := strings.Replace(locked, "redis://", "redis://:s3cret@", 1)
	code, out, errOut = doctorRun(t, []string{good, right}, fast...)
	if code == exitUnreachable || code == exitUsage || strings.Contains(out+errOut, "s3cret") {
		t.Fatalf("right password: exit %d, or the password shown\n%s%s", code, out, errOut)
	}
}

// A node that freezes (SIGSTOP) while its clock is sampled fails the
// latency check, and doctor does not wait on it for every sample.
func TestDoctorFrozenWhileSampling(t *testing.T) {
	good := durableNode(t)
	frozen, p := redisProc(t, "--appendonly", "yes", "--appendfsync", "always")
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		code, out, errOut := doctorRun(t, []string{good, frozen}, "--samples", "20", "--window", "2s")
		done <- result{code, out, errOut}
	}()
	time.Sleep(700 * time.Millisecond) // connected and sampling
	if err := p.Fault(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	took := time.Since(start)
	_ = p.Heal()
	if r.code != exitFailure {
		t.Fatalf("exit %d, want 1\n%s%s", r.code, r.out, r.err)
	}
	if v, reason := row(t, r.out, frozen, checkLatency); v != verdictFail || !strings.Contains(reason, "pings failed") {
		t.Errorf("frozen node: %s %s", v, reason)
	}
	// Three silent rounds of 2s timeouts each (PING and TIME), not twenty.
	if took > 20*time.Second {
		t.Errorf("doctor took %v on a frozen node", took)
	}
}

// --json prints a report with every check on every node, the clock and
// latency numbers, the features, and the quorum summary.
func TestDoctorJSON(t *testing.T) {
	urls := []string{durableNode(t), durableNode(t)}
	code, out, errOut := doctorRun(t, urls, "--json", "--samples", "10", "--window", "1s", "--node-timeout", "1s")
	if code != exitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	var rep DoctorReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out)
	}
	if len(rep.Nodes) != 2 || rep.Verdict != verdictOK || rep.Quorum.Needed != 2 || rep.Quorum.Nodes != 2 || rep.Quorum.Verdict == "" ||
		rep.Settings.Samples != 10 || rep.Settings.WindowMs != 1000 || rep.Settings.TTLms != 10000 || rep.Settings.DriftFactor != 0.01 {
		t.Fatalf("report: %+v", rep)
	}
	for i, n := range rep.Nodes {
		if n.Node != urls[i] || !n.Reachable || n.Server != "redis" || n.Version == "" || n.RunID == "" || n.Role != "master" ||
			!n.AOF || n.Appendfsync != "always" || n.MaxMemoryPolicy == "" {
			t.Errorf("node %d: %+v", i, n)
		}
		got := map[string]Check{}
		for _, c := range n.Checks {
			got[c.Check] = c
		}
		for _, name := range doctorChecks {
			c, ok := got[name]
			if !ok || !slices.Contains([]string{verdictOK, verdictInfo, verdictWarn, verdictFail}, c.Verdict) || c.Reason == "" {
				t.Errorf("node %d check %s: %+v (present %v)", i, name, c, ok)
			}
		}
		// The clock of a local node is measured: a rate error is reported
		// (its value is not asserted: the machine may be loaded).
		if c := n.Clock; c == nil || c.Samples < 3 || c.WindowMs <= 0 || c.ResolutionPPM <= 0 || math.IsNaN(c.RateErrorPPM) || math.IsInf(c.RateErrorPPM, 0) || c.DriftBudgetPPM != 10000 {
			t.Errorf("node %d clock: %+v", i, c)
		}
		if l := n.Latency; l == nil || l.Pings != 10 || l.P50Ms <= 0 || l.MaxMs < l.P50Ms {
			t.Errorf("node %d latency: %+v", i, l)
		}
		feat := map[string]Feature{}
		for _, f := range n.Features {
			feat[f.Name] = f
		}
		if f, ok := feat["Lua/EVALSHA"]; !ok || !f.Available || !f.Used {
			t.Errorf("node %d features: %+v", i, n.Features)
		}
		if _, ok := feat["WAITAOF"]; !ok {
			t.Errorf("node %d features lack WAITAOF: %+v", i, n.Features)
		}
	}
}

func TestDoctorUsage(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"doctor"}, "--nodes is required"},
		{[]string{"doctor", "--nodes", "http://x:1"}, "bad node URL"},
		{[]string{"doctor", "--nodes", "redis://"}, "no host"},
		{[]string{"doctor", "--nodes", "redis://:pw@h:99999"}, "not in 1-65535"},
		{[]string{"doctor", "--nodes", "redis://h:1", "extra"}, "no arguments"},
		{[]string{"doctor", "--nodes", "redis://h:1", "--samples", "2"}, "--samples"},
		{[]string{"doctor", "--nodes", "redis://h:1", "--drift-factor", "1"}, "--drift-factor"},
		{[]string{"doctor", "--nodes", "redis://h:1", "--node-timeout", "0s"}, "--node-timeout"},
		{[]string{"doctor", "--nodes", "redis://h:1", "--ttl", "1ms"}, "--ttl"},
		{[]string{"doctor", "--nodes", "redis://h:1", "--window", "1ms"}, "--window"},
		{[]string{"doctor", "--nodes", "redis://h:1,redis://h:2", "--quorum", "1"}, "--quorum"},
		{[]string{"doctor", "--bogus"}, "flag provided but not defined"},
	}
	for _, tc := range cases {
		code, out, errOut := runCmd(t, tc.args...)
		if code != exitUsage || !strings.Contains(out+errOut, tc.want) || strings.Contains(out+errOut, ":pw@") {
			t.Errorf("redlock %q: exit %d, want 2 with %q\n%s%s", tc.args, code, tc.want, out, errOut)
		}
	}
}

// The library's drift estimator, run over doctor's samples at once, finds
// a known rate error in samples whose midpoints are off by up to half
// their round trip; a step in the node's clock is a jump, and the rate is
// over the samples after it.
func TestDoctorFitClock(t *testing.T) {
	const ppm = 700.0
	base := time.Unix(1_700_000_000, 0)
	var ss []timeSample
	for i := 0; i < 21; i++ {
		mid := time.Duration(i) * 100 * time.Millisecond
		rtt := time.Duration(100+(i%3)*20) * time.Microsecond
		jitter := time.Duration((i%5)-2) * 10 * time.Microsecond // within ±rtt/2
		node := base.Add(time.Duration(float64(mid)*(1+ppm/1e6)) + jitter)
		ss = append(ss, timeSample{admin.ClockSample{Client: mid - rtt/2, Node: node, RTT: rtt}, 5 * time.Millisecond})
	}
	c := fitClock(ss, 0.01)
	if c == nil || math.Abs(c.RateErrorPPM-ppm) > c.ResolutionPPM || c.ResolutionPPM > 250 || c.Samples != 21 ||
		c.OffsetMs != 5 || c.WindowMs != 2000 || c.Jumps != 0 || c.MaxResidualUs > 50 {
		t.Fatalf("fit: %+v", c)
	}
	if fitClock(ss[:2], 0.01) != nil {
		t.Error("two samples gave a fit")
	}

	// From sample 10 on the node's clock is 50ms ahead.
	for i := 10; i < len(ss); i++ {
		ss[i].Node = ss[i].Node.Add(50 * time.Millisecond)
	}
	c = fitClock(ss, 0.01)
	if c == nil || c.Jumps != 1 || c.Samples != 11 || math.Abs(c.RateErrorPPM-ppm) > c.ResolutionPPM {
		t.Fatalf("fit over a jump: %+v", c)
	}
	if v := clockCheck(c, 0.01); v.Verdict != verdictWarn || !strings.Contains(v.Reason, "jumped 1 times") {
		t.Errorf("clock check after a jump: %+v", v)
	}
}

func TestDoctorClockVerdicts(t *testing.T) {
	for _, tc := range []struct {
		rate, res float64
		want      string
		reason    string
	}{
		{30, 50, verdictOK, "none resolved"},
		{100, 50, verdictOK, "node fast"},
		{-300, 50, verdictOK, "node slow"},
		{6000, 50, verdictWarn, "more than half"},
		{-12000, 50, verdictFail, "outside the drift budget"},
		{100, 6000, verdictWarn, "cannot resolve"},
		{30000, 6000, verdictFail, "outside the drift budget"},
	} {
		c := clockCheck(&ClockReport{Samples: 20, WindowMs: 2000, RateErrorPPM: tc.rate, ResolutionPPM: tc.res}, 0.01)
		if c.Verdict != tc.want || !strings.Contains(c.Reason, tc.reason) {
			t.Errorf("rate %v ±%v: %s %s", tc.rate, tc.res, c.Verdict, c.Reason)
		}
	}
	if c := clockCheck(nil, 0.01); c.Verdict != verdictWarn {
		t.Errorf("no samples: %+v", c)
	}
}

func TestDoctorLatencyVerdicts(t *testing.T) {
	cfg := doctorConfig{nodeTimeout: 50 * time.Millisecond, callTimeout: 50 * time.Millisecond}
	for _, tc := range []struct {
		l    LatencyReport
		want string
	}{
		{LatencyReport{Pings: 20, P50Ms: 0.2, P99Ms: 1, MaxMs: 1}, verdictOK},
		{LatencyReport{Pings: 20, P50Ms: 0.2, P99Ms: 30, MaxMs: 30}, verdictWarn},
		{LatencyReport{Pings: 20, P50Ms: 60, P99Ms: 70, MaxMs: 70}, verdictFail},
		{LatencyReport{Pings: 20, Failed: 1, P50Ms: 0.2, P99Ms: 1, MaxMs: 1}, verdictFail},
		{LatencyReport{Pings: 20, Failed: 20}, verdictFail},
	} {
		if c := latencyCheck(&tc.l, cfg); c.Verdict != tc.want {
			t.Errorf("%+v: %s %s", tc.l, c.Verdict, c.Reason)
		}
	}
	capped := doctorConfig{nodeTimeout: time.Second, callTimeout: 100 * time.Millisecond}
	if c := latencyCheck(&LatencyReport{Pings: 4, P50Ms: 1, P99Ms: 1, MaxMs: 1}, capped); !strings.Contains(c.Reason, "capped at TTL/10") {
		t.Errorf("capped timeout not said: %s", c.Reason)
	}
}

func TestDoctorEvictionVerdicts(t *testing.T) {
	for _, tc := range []struct {
		policy string
		max    int64
		want   string
	}{
		{"noeviction", 0, verdictOK},
		{"noeviction", 1 << 20, verdictOK},
		{"allkeys-lru", 0, verdictOK},
		{"allkeys-lru", 1 << 20, verdictFail},
		{"allkeys-lfu", 1 << 20, verdictFail},
		{"allkeys-random", 1 << 20, verdictFail},
		{"volatile-lru", 1 << 20, verdictFail},
		{"volatile-ttl", 1 << 20, verdictFail},
		{"volatile-random", 1 << 20, verdictFail},
		{"volatile-lfu", 1 << 20, verdictFail},
		{"", 0, verdictWarn},
	} {
		if c := evictionCheck(&NodeReport{MaxMemoryPolicy: tc.policy, MaxMemory: tc.max}); c.Verdict != tc.want {
			t.Errorf("%s maxmemory %d: %s %s", tc.policy, tc.max, c.Verdict, c.Reason)
		}
	}
}

func TestDoctorVersions(t *testing.T) {
	avail := func(server, version string) map[string]bool {
		c, fs := versionCheck(server, version, "")
		if c.Verdict != verdictOK {
			t.Errorf("%s %s: %+v", server, version, c)
		}
		m := map[string]bool{}
		for _, f := range fs {
			m[f.Name] = f.Available
		}
		return m
	}
	if m := avail("redis", "7.0.15"); !m["Lua/EVALSHA"] || !m["pub/sub hand-off"] || m["WAITAOF"] || m["HEXPIRE"] || m["SET IFEQ"] {
		t.Errorf("7.0.15: %v", m)
	}
	if m := avail("redis", "7.2.4"); !m["WAITAOF"] || m["HEXPIRE"] {
		t.Errorf("7.2.4: %v", m)
	}
	if m := avail("redis", "7.4.0"); !m["HEXPIRE"] || m["SET IFEQ"] {
		t.Errorf("7.4.0: %v", m)
	}
	if m := avail("redis", "8.4.0"); !m["SET IFEQ"] || !m["DELEX"] {
		t.Errorf("8.4.0: %v", m)
	}
	if m := avail("valkey", "8.1.1"); !m["WAITAOF"] || !m["SET IFEQ"] || m["HEXPIRE"] || m["DELIFEQ"] {
		t.Errorf("valkey 8.1.1: %v", m)
	}
	if m := avail("valkey", "9.0.0"); !m["HEXPIRE"] || !m["DELIFEQ"] {
		t.Errorf("valkey 9.0.0: %v", m)
	}
	in := parseInfo("# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.1.1\r\n")
	if s, v := serverVersion(in); s != "valkey" || v != "8.1.1" {
		t.Errorf("valkey INFO: %s %s", s, v)
	}
	if s, v := serverVersion(parseInfo("redis_version:7.0.15\r\n")); s != "redis" || v != "7.0.15" {
		t.Errorf("redis INFO: %s %s", s, v)
	}
}

// TestDoctorFenceClocks: node clocks that step back, or differ from
// another node's by more than half of admin.FenceMargin beyond the
// measuring error, turn an OK clock check into a warning.
func TestDoctorFenceClocks(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	var ss []timeSample
	for _, d := range []time.Duration{0, time.Second, 500 * time.Millisecond, 2 * time.Second} {
		ss = append(ss, timeSample{ClockSample: admin.ClockSample{Node: base.Add(d)}})
	}
	if n := stepsBack(ss); n != 1 {
		t.Fatalf("stepsBack %d, want 1", n)
	}
	half := ms(admin.FenceMargin) / 2
	nodes := []NodeReport{
		{Clock: &ClockReport{OffsetMs: 0, OffsetErrMs: 1}},
		{Clock: &ClockReport{OffsetMs: half + 1, OffsetErrMs: 1}}, // within the error
		{Clock: &ClockReport{OffsetMs: half + 10, OffsetErrMs: 1}},
		{}, // unreachable: no clock
	}
	skews(nodes)
	if got := nodes[1].Clock.SkewMs; got != half-1 {
		t.Fatalf("node 1 skew %v, want %v (to node 0, less both errors)", got, half-1)
	}
	ok := Check{checkClock, verdictOK, "fine"}
	for i, want := range []string{verdictWarn, verdictOK, verdictWarn} {
		if c := fenceClockCheck(ok, nodes[i].Clock); c.Verdict != want {
			t.Errorf("node %d (skew %v): %s %s", i, nodes[i].Clock.SkewMs, c.Verdict, c.Reason)
		}
	}
	if c := fenceClockCheck(ok, &ClockReport{StepsBack: 2}); c.Verdict != verdictWarn || !strings.Contains(c.Reason, "stepped back") {
		t.Errorf("steps back: %+v", c)
	}
	fail := Check{checkClock, verdictFail, "bad rate"}
	if c := fenceClockCheck(fail, &ClockReport{StepsBack: 1}); c.Verdict != verdictFail {
		t.Errorf("a failing check must stay failing: %+v", c)
	}
	if c := fenceClockCheck(ok, nil); c != ok {
		t.Errorf("no clock: %+v", c)
	}
}

// The persistence advice about fencing says what fencing.go promises:
// fence registers expire (TTL plus FenceMargin), they are not kept forever.
func TestDoctorFenceRegisterAdvice(t *testing.T) {
	for _, n := range []*NodeReport{{AOF: false}, {AOF: true, Appendfsync: "everysec"}, {AOF: true, Appendfsync: "no"}} {
		c := persistenceCheck(n)
		if strings.Contains(c.Reason, "do not expire") || !strings.Contains(c.Reason, "TTL plus "+admin.FenceMargin.String()) {
			t.Errorf("persistence advice for %+v: %q", n, c.Reason)
		}
	}
}

// The durable-votes row: information unless --durable, then a node that
// cannot confirm votes in time is a FAIL.
func TestDurableCheck(t *testing.T) {
	for _, c := range []struct {
		n        NodeReport
		required bool
		verdict  string
		says     string
	}{
		{NodeReport{WaitAOF: "ERR unknown command 'waitaof'"}, false, verdictInfo, "no: WAITAOF refused"},
		{NodeReport{WaitAOF: "ERR unknown command 'waitaof'"}, true, verdictFail, "Redis 7.2+"},
		{NodeReport{WaitAOF: "yes", Appendfsync: "always"}, true, verdictOK, "yes"},
		{NodeReport{Server: "valkey", WaitAOF: "yes", Appendfsync: "everysec", Hz: 10}, false, verdictOK, "(hz 10): up to 100ms"},
		{NodeReport{Server: "valkey", WaitAOF: "yes", Appendfsync: "everysec", Hz: 10}, true, verdictFail, "raise hz"},
		{NodeReport{Server: "valkey", WaitAOF: "yes", Appendfsync: "everysec", Hz: 100}, true, verdictOK, "(hz 100): up to 10ms"},
		{NodeReport{Server: "redis", WaitAOF: "yes", Appendfsync: "everysec", Hz: 100}, true, verdictFail, "use appendfsync always"},
	} {
		got := durableCheck(&c.n, c.required, 50*time.Millisecond)
		if got.Verdict != c.verdict || !strings.Contains(got.Reason, c.says) {
			t.Errorf("%+v required=%v: %s %q, want %s containing %q", c.n, c.required, got.Verdict, got.Reason, c.verdict, c.says)
		}
	}
}

// doctor run as a user made from exactly the documented doctor line (read
// from docs/operations.md) reaches every node and judges every row it
// judges as the default user: no check fails for a missing permission.
func TestDoctorAsDocumentedUser(t *testing.T) {
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "ACL SETUSER doctor ") {
			line = l
		}
	}
	if line == "" {
		t.Fatal("docs/operations.md has no ACL SETUSER doctor line")
	}
	var args []interface{}
	for _, f := range strings.Fields(line) {
		args = append(args, f)
	}
	urls := []string{durableNode(t), durableNode(t), durableNode(t)}
	users := make([]string, len(urls))
	for i, u := range urls {
		if err := redisClient(t, u).Do(context.Background(), args...).Err(); err != nil {
			t.Fatalf("%s on %s: %v", line, u, err)
		}
		users[i] = strings.Replace(u, "redis://", "redis://doctor:s3cret@", 1)
	}
	code, out, errOut := doctorRun(t, users, "--node-timeout", "1s")
	if code != exitOK || strings.Contains(out+errOut, "NOPERM") {
		t.Fatalf("exit %d, want 0 and no NOPERM\n%s%s", code, out, errOut)
	}
	for _, u := range users {
		u = strings.Replace(u, "s3cret", "xxxxx", 1) // as doctor prints it
		for _, c := range []string{checkRole, checkDistinct, checkPersistence, checkUptime, checkEviction, checkVersion, checkClock, checkLatency, checkRestartWindow} {
			if v, reason := row(t, out, u, c); v != verdictOK {
				t.Errorf("%s %s: %s %s", u, c, v, reason)
			}
		}
	}
}

// Without -v, five healthy nodes fit on one screen: a line per node, each
// finding that is not OK once however many nodes share it, the quorum and
// the verdict; and no line says OK beside an error (a WAITAOF that a
// Redis 7.0 node refuses is INFO, not OK).
func TestDoctorBrief(t *testing.T) {
	var urls []string
	for range 5 {
		urls = append(urls, redisNode(t))
	}
	code, out, errOut := runCmd(t, append([]string{"doctor", "--nodes", strings.Join(urls, ",")}, fast...)...)
	if code != exitOK {
		t.Fatalf("exit %d, want 0\n%s%s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) > 25 {
		t.Errorf("%d lines for 5 healthy nodes, want at most 25:\n%s", len(lines), out)
	}
	if n := strings.Count(out, "appendonly no: a restart forgets"); n != 1 {
		t.Errorf("the persistence finding printed %d times, want once:\n%s", n, out)
	}
	for _, u := range urls {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(u) + `\s+WARN\s`).MatchString(out) {
			t.Errorf("no line with its verdict for %s:\n%s", u, out)
		}
	}
	for _, l := range lines {
		if strings.Contains(l, "OK") && (strings.Contains(l, "refused") || strings.Contains(l, "ERR ")) {
			t.Errorf("OK beside an error: %q", l)
		}
	}
	if !strings.Contains(out, "verdict: OK with") || !strings.Contains(out, "-v: every check") {
		t.Errorf("no verdict line pointing to -v:\n%s", out)
	}
}
