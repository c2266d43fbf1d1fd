package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/admin"
	"github.com/redlock-go/redlock/cmd/internal/localredis"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quietRedis{}) // refused dials to the nodes tests stop
	goleak.VerifyTestMain(m)
}

func nodes(t *testing.T, n int) []string {
	t.Helper()
	nd, kind, err := startNodes(n, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("nodes: %s", kind)
	t.Cleanup(func() {
		for _, x := range nd {
			x.Close()
		}
	})
	return urlsOf(nd)
}

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestDemo(t *testing.T) {
	code, out, errOut := runCmd(t, "demo", "--duration", "3s", "--workers", "4")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"5 nodes on", "overlaps:         0", "node 3", "stopped", "back", "acquisitions:",
		" util ", " passed ", "hand-off:", "acquisitions passed on without a round trip", "waits ended by:   release notification"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

// The embedded nodes (what make demo runs on a machine without
// redis-server): the fault stops node 3 and brings it back.
func TestDemoEmbedded(t *testing.T) {
	code, out, errOut := runCmd(t, "demo", "--embedded", "--duration", "3s", "--workers", "4")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"5 nodes on embedded in-process nodes", "overlaps:         0", "node 3", "stopped", "back", "acquisitions:",
		" util ", "hand-off:", "acquisitions passed on without a round trip"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	if code, _, _ := runCmd(t, "demo", "--embedded", "--nodes", "redis://127.0.0.1:1"); code != exitUsage {
		t.Errorf("--embedded with --nodes: exit %d, want %d", code, exitUsage)
	}
}

// The demo serves the redlockotel instruments for Prometheus while it runs,
// and its summary names the faulted node's failed calls.
func TestDemoMetrics(t *testing.T) {
	port, err := localredis.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() {
		var out, errOut bytes.Buffer
		code := run([]string{"demo", "--duration", "3s", "--workers", "4", "--metrics-addr", addr}, &out, &errOut)
		done <- result{code, out.String(), errOut.String()}
	}()
	// Scrape while the demo runs, until its metrics show an acquisition:
	// however long the demo takes to start its nodes and workers, the
	// endpoint serves for the whole run.
	var scraped string
	var r result
	for running := true; running; {
		select {
		case r = <-done:
			running = false
			continue
		case <-time.After(200 * time.Millisecond):
		}
		if strings.Contains(scraped, `redlock_outcome="acquired"`) {
			continue // seen: wait for the demo to end
		}
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		scraped = string(b)
	}
	if r.code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.out, r.err)
	}
	for _, want := range []string{"redlock_acquire_duration_seconds_count{", `redlock_outcome="acquired"`, "redlock_node_duration_seconds_bucket{", "redlock_locks_held{"} {
		if !strings.Contains(scraped, want) {
			t.Errorf("scrape lacks %q:\n%s", want, scraped)
		}
	}
	if !strings.Contains(r.out, "metrics: http://"+addr+"/metrics") || !regexp.MustCompile(`node 3 \(\S+\) failed calls: .*\d+ (timeout|error)`).MatchString(r.out) {
		t.Errorf("demo output lacks the metrics URL or node 3's failed calls:\n%s", r.out)
	}
}

func TestDemoMetricsAddrInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, out, errOut := runCmd(t, "demo", "--duration", "1s", "--metrics-addr", ln.Addr().String())
	if code != exitUsage || !strings.Contains(errOut, "--metrics-addr") {
		t.Fatalf("exit %d, want %d with a --metrics-addr error\n%s\n%s", code, exitUsage, out, errOut)
	}
}

func TestInspectAndUnlock(t *testing.T) {
	urls := nodes(t, 3)
	nodesArg := strings.Join(urls, ",")
	c, err := redlock.NewFromURLs(urls, redlock.WithName("worker-3"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	l, err := c.Lock(ctx, "lock:held", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Lock returned at quorum; the last node's SET may still be on its
	// way. Close waits for it (the lock stays: nothing releases it), and
	// what each node then holds is what inspect must report.
	c.Close()
	held := 0
	for _, u := range urls {
		opt, _ := redis.ParseURL(u)
		rc := redis.NewClient(opt)
		if rc.Get(ctx, "lock:held").Val() == l.Owner() {
			held++
		}
		rc.Close()
	}
	if held < c.Quorum() {
		t.Fatalf("lock held on %d nodes, quorum %d", held, c.Quorum())
	}

	// The table names the holder by its Client's instance id.
	_, attempt := admin.SplitOwner(l.Owner())
	code, out, _ := runCmd(t, "inspect", "lock:*", "--nodes", nodesArg)
	if code != exitOK || !strings.Contains(out, "lock:held") || !strings.Contains(out, c.ID()) || !strings.Contains(out, attempt) ||
		!strings.HasPrefix(c.ID(), "worker-3/") || !strings.Contains(out, "yes") {
		t.Fatalf("inspect of a held lock by %s: exit %d\n%s", c.ID(), code, out)
	}

	// A partial leftover on one node and a key without TTL on all.
	raw := make([]*redis.Client, len(urls))
	for i, u := range urls {
		opt, _ := redis.ParseURL(u)
		raw[i] = redis.NewClient(opt)
		defer raw[i].Close()
	}
	raw[0].Set(ctx, "lock:leftover", "old-owner", time.Minute)
	for _, r := range raw {
		r.Set(ctx, "lock:forever", "x", 0)
	}
	code, out, _ = runCmd(t, "inspect", "--json", "--nodes", nodesArg, "lock:*")
	if code != exitFailure {
		t.Fatalf("inspect with leftovers: exit %d, want %d\n%s", code, exitFailure, out)
	}
	var reports []KeyReport
	if err := json.Unmarshal([]byte(out), &reports); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out)
	}
	byKey := map[string]KeyReport{}
	for _, r := range reports {
		byKey[r.Key] = r
	}
	if r := byKey["lock:leftover"]; !r.Partial || r.Held != 1 || r.QuorumHeld {
		t.Errorf("leftover: %+v", r)
	}
	if r := byKey["lock:forever"]; !r.NoTTL || !r.QuorumHeld {
		t.Errorf("no-TTL key: %+v", r)
	}
	if r := byKey["lock:held"]; r.Partial || !r.QuorumHeld || r.Held != held || r.MinTTLms <= 0 || r.Owner != l.Owner() || r.Client != c.ID() {
		t.Errorf("held: %+v", r)
	}
	code, out, _ = runCmd(t, "inspect", "lock:*", "--nodes", nodesArg)
	if !strings.Contains(out, "PARTIAL") || !strings.Contains(out, "NO-TTL") {
		t.Errorf("table lacks flags:\n%s", out)
	}

	// unlock refuses without --force and deletes nothing.
	code, out, _ = runCmd(t, "unlock", "lock:leftover", "--nodes", nodesArg)
	if code != exitUsage || !strings.Contains(out, "would delete") {
		t.Fatalf("unlock without --force: exit %d\n%s", code, out)
	}
	if raw[0].Exists(ctx, "lock:leftover").Val() != 1 {
		t.Fatal("unlock without --force deleted the key")
	}
	code, out, _ = runCmd(t, "unlock", "lock:leftover", "--force", "--nodes", nodesArg)
	if code != exitOK || !strings.Contains(out, "deleting lock:leftover") || !strings.Contains(out, "on 1 of 3") {
		t.Fatalf("unlock --force: exit %d\n%s", code, out)
	}
	if raw[0].Exists(ctx, "lock:leftover").Val() != 0 {
		t.Fatal("key still there after unlock --force")
	}
}

func TestCLIErrors(t *testing.T) {
	urls := nodes(t, 2)
	// Node 1 requires a password.
	opt, _ := redis.ParseURL(urls[1])
	rc := redis.NewClient(opt)
	if err := rc.ConfigSet(context.Background(), "requirepass", "secret").Err(); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	hostPort := strings.TrimPrefix(urls[1], "redis://")
	cases := []struct {
		args []string
		code int
		want string
	}{
		{nil, exitUsage, "usage"},
		{[]string{"nope"}, exitUsage, "unknown command"},
		{[]string{"inspect", "--nodes", urls[0]}, exitUsage, "one PATTERN"},
		{[]string{"inspect", "x*"}, exitUsage, "--nodes is required"},
		{[]string{"inspect", "x*", "--nodes", "http://bad"}, exitUsage, "bad node URL"},
		{[]string{"inspect", "x*", "--nodes", "redis://:secret@h:99999"}, exitUsage, "port 99999 is not in 1-65535"},
		{[]string{"unlock", "k", "--force", "--nodes", "redis://:secret@"}, exitUsage, "no host"},
		{[]string{"unlock", "k", "--force", "--nodes", "redis://:secret@" + hostPort}, exitOK, "redis://:xxxxx@" + hostPort + ": k absent"},
		{[]string{"inspect", "x*", "--bogus"}, exitUsage, "flag provided but not defined"},
		{[]string{"inspect", "x*", "--nodes", "redis://127.0.0.1:1"}, exitUnreachable, "connection refused"},
		{[]string{"inspect", "x*", "--nodes", "redis://:wrong@" + hostPort}, exitUnreachable, "authentication failed"},
		{[]string{"inspect", "x*", "--nodes", "redis://:secret@" + hostPort}, exitOK, "no matching keys"},
		{[]string{"unlock", "--force", "--nodes", urls[0]}, exitUsage, "one KEY"},
		{[]string{"demo", "--workers", "0"}, exitUsage, "must be positive"},
	}
	for _, tc := range cases {
		code, out, errOut := runCmd(t, tc.args...)
		if code != tc.code || !strings.Contains(out+errOut, tc.want) {
			t.Errorf("redlock %q: exit %d, want %d with %q\n%s%s", tc.args, code, tc.code, tc.want, out, errOut)
		}
		if strings.Contains(out+errOut, ":secret@") || strings.Contains(out+errOut, ":wrong@") {
			t.Errorf("redlock %q shows a password:\n%s%s", tc.args, out, errOut)
		}
	}
}

func TestInspectShowsFence(t *testing.T) {
	urls := nodes(t, 3)
	c, err := redlock.NewFromURLs(urls, redlock.WithFencing())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var l *redlock.Lock
	for i := 0; i < 3; i++ { // three holders in turn
		if l, err = c.Lock(ctx, "fenced", 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			_ = l.Release(ctx)
		}
	}
	c.Close() // waits for every node call: the registers are final
	code, out, _ := runCmd(t, "inspect", "--json", "--nodes", strings.Join(urls, ","), "*")
	if code != exitOK {
		t.Fatalf("inspect: exit %d\n%s", code, out)
	}
	var reports []KeyReport
	if err := json.Unmarshal([]byte(out), &reports); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out)
	}
	// The highest register is at least the last token: a node whose vote
	// came after the decision may hold a higher candidate (its own clock).
	if len(reports) != 1 || reports[0].Key != "fenced" || reports[0].Fence < l.Token() || l.Token() <= 0 {
		t.Fatalf("want only the lock key, with fence >= %d (the registers are not locks, nor leftovers): %+v", l.Token(), reports)
	}
	_, out, _ = runCmd(t, "inspect", "--nodes", strings.Join(urls, ","), "*")
	if !strings.Contains(out, "FENCE") || !strings.Contains(out, " "+strconv.FormatInt(reports[0].Fence, 10)+" ") {
		t.Fatalf("table lacks the fence:\n%s", out)
	}
}
