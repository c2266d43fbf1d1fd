// Package metrics tests the redlockotel package on a real Client against
// real redis-server processes: the recorded values are read back through
// an OpenTelemetry manual reader and scraped from a Prometheus endpoint.
package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/redlockotel"
	"github.com/redlock-go/redlock/redlockotel/metrictest"
)

func TestMain(m *testing.M) {
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
	c, err := redlock.NewFromURLs(harness.URLs(nodes),
		// A 200ms node timeout: healthy nodes must not time out even on a
		// loaded machine (the test checks they report no errors).
		append(m.Options(), redlock.WithNodeTimeout(200*time.Millisecond), redlock.WithRetryBackoff(5*time.Millisecond, 20*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	// Held, then contended: a second TryLock finds it held, a blocking
	// Lock gives up at its ctx deadline after several attempts.
	a, err := c.TryLock(ctx, "a", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryLock(ctx, "a", 10*time.Second); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("second TryLock: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	_, err = c.Lock(wctx, "a", 10*time.Second)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock on a held key: %v", err)
	}
	got := metrictest.Collect(t, reader)
	if got["redlock.locks.held{}"] != 1 {
		t.Fatalf("held = %v, want 1\n%s", got["redlock.locks.held{}"], metrictest.Dump(got))
	}

	// Extend, and lose locks two ways: extend after expiry, release after
	// expiry.
	if err := a.Extend(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	b, err := c.TryLock(ctx, "b", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.TryLock(ctx, "d", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1050 * time.Millisecond)
	if err := b.Extend(ctx, time.Second); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("extend after expiry: %v", err)
	}
	_ = d.Release(ctx) // after its deadline: counted as lost

	// One node frozen: acquisitions still succeed at quorum; the frozen
	// node's calls time out afterwards (SET at the 200ms node timeout, the
	// release after it at the 2s release timeout) and are counted then.
	// One node killed: connection errors.
	nodes[4].Freeze()
	e, err := c.TryLock(ctx, "e", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Release(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2400 * time.Millisecond)
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
	frozen, killed := nodes[4].Addr, nodes[3].Addr
	atLeast := map[string]float64{
		"redlock.acquire.duration{redlock.outcome=acquired}":     5, // a b d e f
		"redlock.acquire.duration{redlock.outcome=held}":         1,
		"redlock.acquire.duration{redlock.outcome=deadline}":     1,
		"redlock.acquire.attempts{redlock.outcome=deadline}:sum": 3, // ~150ms of 5-20ms backoff
		"redlock.renewals{redlock.outcome=lost}":                 1,
		"redlock.releases{redlock.outcome=released}":             3, // e f a
		"redlock.releases{redlock.outcome=not_held}":             1, // d, after its deadline
		// The frozen node's calls ended after their rounds, at their
		// deadlines; every call to every node was timed.
		"redlock.node.errors{error.type=timeout,redlock.node=" + frozen + ",redlock.op=acquire}": 1,
		"redlock.node.errors{error.type=timeout,redlock.node=" + frozen + ",redlock.op=release}": 1,
		"redlock.node.duration{redlock.node=" + frozen + ",redlock.op=acquire}":                  5,
	}
	// The killed node: refused connections, which go-redis retries until
	// the node deadline, so either kind.
	if got["redlock.node.errors{error.type=error,redlock.node="+killed+",redlock.op=acquire}"]+
		got["redlock.node.errors{error.type=timeout,redlock.node="+killed+",redlock.op=acquire}"] < 1 {
		t.Errorf("no acquire error counted on the killed node %s", killed)
	}
	for k, v := range atLeast {
		if got[k] < v {
			t.Errorf("%s = %v, want at least %v", k, got[k], v)
		}
	}
	exact := map[string]float64{
		"redlock.acquire.duration{redlock.outcome=acquired}": 5,
		"redlock.locks.held{}":                               0,
		"redlock.renewals{redlock.outcome=extended}":         1,
		"redlock.locks.lost{redlock.op=extend}":              1,
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
			!strings.Contains(k, frozen) && !strings.Contains(k, killed) {
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
		`redlock_outcome="acquired"} 5`,
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
