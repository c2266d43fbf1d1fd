package metrics

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/redlockotel"
	"github.com/redlock-go/redlock/redlockotel/metrictest"
)

// A node restarted empty under a watched Client: its quarantine is
// counted by redlock.quarantine.started and redlock.quarantine.nodes.
func TestQuarantineMetrics(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	reader, m := manualMetrics(t)
	c, err := redlock.NewFromURLs(harness.URLs(nodes), append(m.Options(), redlock.WithNodeTimeout(time.Second),
		redlock.WithRestartQuarantine(time.Minute))...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m.Watch(c)
	ctx := context.Background()
	try := func() {
		if l, err := c.TryLock(ctx, "q:metrics", time.Second); err == nil {
			_ = l.Release(ctx)
		}
	}
	try() // learns every node's identity
	if err := nodes[0].Restart(); err != nil {
		t.Fatal(err)
	}
	guard := time.Now().Add(30 * time.Second) // a hang guard, not a speed check
	for c.Stats().Quarantine.Started < 1 {
		if time.Now().After(guard) {
			t.Fatalf("restart not quarantined: %+v", c.Stats().Quarantine)
		}
		try() // redials the restarted node, which reveals its new run_id
		time.Sleep(10 * time.Millisecond)
	}
	vals := metrictest.Collect(t, reader)
	if vals["redlock.quarantine.started{}"] != 1 || vals["redlock.quarantine.nodes{}"] != 1 {
		t.Fatalf("collected:\n%s", metrictest.Dump(vals))
	}
}

// manualMetrics returns a Metrics on a manual reader, closed when the test
// ends, for tests that collect the instruments themselves.
func manualMetrics(t *testing.T) (*sdkmetric.ManualReader, *redlockotel.Metrics) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	m, err := redlockotel.New(redlockotel.WithMeterProvider(provider))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return reader, m
}
