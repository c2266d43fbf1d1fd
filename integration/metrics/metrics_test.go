// Package metrics tests the redlockotel package on a real Client against
// real redis-server processes: the recorded values are read back through
// an OpenTelemetry manual reader and scraped from a Prometheus endpoint.
package metrics

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/clock"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/observe"
	"github.com/redlock-go/redlock/redlockotel"
	"github.com/redlock-go/redlock/redlockotel/metrictest"
)

func TestMain(m *testing.M) {
	harness.QuietRedisLogs()
	goleak.VerifyTestMain(m, harness.IgnoreRedisDial())
}

// TestMetricsAgainstRealNodes drives a Client through every outcome the
// metrics distinguish and reads the values back.
func TestMetricsAgainstRealNodes(t *testing.T) {
	nodes := harness.Start(t, 5, harness.Config{})
	reader := sdkmetric.NewManualReader()
	reg := promclient.NewRegistry()
	exporter, err := prometheus.New(prometheus.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithReader(exporter))
	defer provider.Shutdown(context.Background())
	m, err := redlockotel.New(redlockotel.WithMeterProvider(provider))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// The Client's clock can be moved on (locks then run out of validity
	// at once); the nodes' keys expire on their own clock.
	clk := &offsetClock{Clock: clock.Real()}
	ev := &nodeEvents{}
	c, err := redlock.NewFromURLs(harness.URLs(nodes),
		// A 1s node timeout, and TTLs of at least 5s (the node timeout is
		// capped at TTL/10): healthy nodes must not time out even on a
		// loaded machine (the test checks they report no errors).
		append(m.Options(), redlock.WithNodeTimeout(time.Second), redlock.WithRetryBackoff(5*time.Millisecond, 20*time.Millisecond),
			redlock.WithClock(clk), redlock.WithNodeObserver(ev.observe))...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	// Held, then contended: a second TryLock finds it held, a blocking
	// Lock gives up at its ctx deadline after several attempts.
	a, err := c.TryLock(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryLock(ctx, "a", time.Minute); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("second TryLock: %v", err)
	}
	// Every node has answered both (the second TryLock returned once the
	// quorum was out of reach): the refusals counted from here on are the
	// blocking Lock's. Its ctx runs out once more nodes have refused it
	// than two attempts can bring: it made at least three, however long
	// each took.
	ev.waitFor(t, "every node's answers to the TryLocks", func(n map[string]int) bool { return n["acquire"] == 10 })
	wctx := newExpiring()
	refusals := ev.count("refused")
	ev.onRefusal(func(n int) {
		if n > refusals+2*len(nodes) {
			wctx.expire()
		}
	})
	_, err = c.Lock(wctx, "a", time.Minute)
	ev.onRefusal(nil)
	var qe *redlock.QuorumError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &qe) || qe.Attempts < 3 {
		t.Fatalf("Lock on a held key: %v", err)
	}
	got := metrictest.Collect(t, reader)
	if got["redlock.locks.held{}"] != 1 {
		t.Fatalf("held = %v, want 1\n%s", got["redlock.locks.held{}"], metrictest.Dump(got))
	}

	// Extend, and lose locks two ways: extend after expiry, release after
	// expiry. The Client's clock moves past the 5s locks' validity (not
	// the minute of a's), and d's keys go as if they had expired on the
	// nodes: every node refuses the release.
	if err := a.Extend(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	b, err := c.TryLock(ctx, "b", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.TryLock(ctx, "d", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	clk.off.Store(int64(6 * time.Second))
	if err := b.Extend(ctx, 5*time.Second); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("extend after expiry: %v", err)
	}
	// d's keys are in place (every acquisition so far has been answered:
	// two TryLocks, the Lock's attempts, b and d, five nodes each).
	ev.waitFor(t, "every node's answer to d's acquisition", func(n map[string]int) bool { return n["acquire"] >= 5*(4+qe.Attempts) })
	for _, n := range nodes {
		rc := n.Client()
		rc.Del(ctx, "d")
		rc.Close()
	}
	if err := d.Release(ctx); !errors.Is(err, redlock.ErrNotHeld) { // after its deadline: counted as lost
		t.Fatalf("release after expiry: %v", err)
	}

	// One node frozen: acquisitions still succeed at quorum; the frozen
	// node's calls time out afterwards (SET at the 1s node timeout, the
	// release after it at the 2.5s release timeout) and are counted then.
	// One node killed: connection errors.
	frozen, killed := nodes[4].Addr, nodes[3].Addr
	// A lock of e's TTL first, so that every node's TTL register already
	// carries it: e's command then goes to the frozen node as it is (not
	// held back by the register's publish timing out there).
	released := ev.count("release")
	warm, err := c.TryLock(ctx, "e-warm", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	ev.waitFor(t, "every node's answer to the warm-up's release", func(n map[string]int) bool { return n["release"] >= released+5 })
	nodes[4].Freeze()
	e, err := c.TryLock(ctx, "e", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Thawed once an acquisition (e's) and a release (e's, or one still
	// in flight when the node froze) have timed out there.
	ev.waitFor(t, "the frozen node's calls to time out", func(n map[string]int) bool {
		return n["acquire timeout "+frozen] >= 1 && n["release timeout "+frozen] >= 1
	})
	nodes[4].Thaw()
	nodes[3].Kill()
	f, err := c.TryLock(ctx, "f", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close() // waits for the calls still in flight

	got = metrictest.Collect(t, reader)
	if n := got["redlock.acquire.attempts{redlock.outcome=deadline}:sum"]; n != float64(qe.Attempts) {
		t.Errorf("attempts of the Lock that ran out: %v recorded, %d made", n, qe.Attempts)
	}
	atLeast := map[string]float64{
		"redlock.acquire.duration{redlock.outcome=acquired}":     5, // a b d e f
		"redlock.acquire.duration{redlock.outcome=held}":         1,
		"redlock.acquire.duration{redlock.outcome=deadline}":     1,
		"redlock.acquire.attempts{redlock.outcome=deadline}:sum": 3, // its ctx ran out after the third
		"redlock.renewals{redlock.outcome=lost}":                 1,
		"redlock.releases{redlock.outcome=released}":             3, // e f a
		"redlock.releases{redlock.outcome=not_held}":             1, // d, after its deadline
		// The frozen node's calls ended after their rounds, at their
		// deadlines; every call to every node was timed.
		"redlock.node.errors{error.type=timeout,redlock.op=acquire," + server(frozen) + "}": 1,
		"redlock.node.errors{error.type=timeout,redlock.op=release," + server(frozen) + "}": 1,
		"redlock.node.duration{redlock.op=acquire," + server(frozen) + "}":                  5,
	}
	// The killed node: refused connections, which go-redis retries until
	// the node deadline, so either kind.
	if got["redlock.node.errors{error.type=error,redlock.op=acquire,"+server(killed)+"}"]+
		got["redlock.node.errors{error.type=timeout,redlock.op=acquire,"+server(killed)+"}"] < 1 {
		t.Errorf("no acquire error counted on the killed node %s", killed)
	}
	for k, v := range atLeast {
		if got[k] < v {
			t.Errorf("%s = %v, want at least %v", k, got[k], v)
		}
	}
	exact := map[string]float64{
		"redlock.acquire.duration{redlock.outcome=acquired}": 6, // a, b, d, the warm-up, e, f
		"redlock.locks.held{}":                               0,
		"redlock.renewals{redlock.outcome=extended}":         1,
		"redlock.locks.lost{redlock.op=expire}":              1, // b: Extend found its validity run out
		"redlock.locks.lost{redlock.op=release}":             1,
	}
	for k, v := range exact {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	// Healthy nodes reported no timeouts or errors (node calls are not cut
	// short when the blocking Lock's ctx runs out).
	for k := range got {
		if strings.HasPrefix(k, "redlock.node.errors") &&
			!strings.Contains(k, server(frozen)) && !strings.Contains(k, server(killed)) {
			t.Errorf("error counted on a healthy node: %s", k)
		}
	}
	if t.Failed() {
		t.Logf("collected:\n%s", metrictest.Dump(got))
	}

	// The same values through a Prometheus scrape.
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`redlock_acquire_duration_seconds_count{otel_scope_name="github.com/redlock-go/redlock/redlockotel"`,
		`redlock_outcome="acquired"} 6`,
		`redlock_locks_lost_total{`,
		`redlock_locks_held{`,
		`redlock_node_errors_total{error_type="timeout"`,
		`redlock_node_duration_seconds_bucket{`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", body)
	}
}

// offsetClock is the real clock moved on by off.
type offsetClock struct {
	clock.Clock
	off atomic.Int64
}

func (c *offsetClock) Now() time.Time { return c.Clock.Now().Add(time.Duration(c.off.Load())) }

// expiring is a ctx that runs out with context.DeadlineExceeded when expire
// is called: a deadline set by an event rather than by the clock.
type expiring struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newExpiring() *expiring {
	return &expiring{Context: context.Background(), done: make(chan struct{})}
}

func (e *expiring) Done() <-chan struct{} { return e.done }

func (e *expiring) Err() error {
	select {
	case <-e.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func (e *expiring) expire() { e.once.Do(func() { close(e.done) }) }

// nodeEvents counts a Client's node calls: by op, "refused" (answered no),
// and op+" timeout "+addr.
type nodeEvents struct {
	mu      sync.Mutex
	n       map[string]int
	refusal func(int)
}

func (ev *nodeEvents) observe(e observe.NodeEvent) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if ev.n == nil {
		ev.n = map[string]int{}
	}
	ev.n[string(e.Op)]++
	if e.Timeout() {
		ev.n[string(e.Op)+" timeout "+e.Addr]++
	}
	if e.Op == "acquire" && e.Err == nil && !e.Vote {
		ev.n["refused"]++
		if ev.refusal != nil {
			ev.refusal(ev.n["refused"])
		}
	}
}

func (ev *nodeEvents) count(k string) int {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return ev.n[k]
}

// onRefusal calls f with the refusals so far after each one (nil: stop).
func (ev *nodeEvents) onRefusal(f func(int)) {
	ev.mu.Lock()
	ev.refusal = f
	ev.mu.Unlock()
}

// waitFor polls until cond holds on the counts; the 30s deadline is far
// beyond what the awaited calls take and only reached if something is
// wrong.
func (ev *nodeEvents) waitFor(t *testing.T, what string, cond func(map[string]int) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ev.mu.Lock()
		ok := cond(ev.n)
		ev.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			ev.mu.Lock()
			defer ev.mu.Unlock()
			t.Fatalf("waited 30s for %s; node calls so far: %v", what, ev.n)
		}
		time.Sleep(time.Millisecond)
	}
}

// server is a node's attributes as metrictest.Key writes them.
func server(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	return "server.address=" + host + ",server.port=" + port
}
