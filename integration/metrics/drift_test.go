package metrics

import (
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/clock"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/redlockotel/metrictest"
)

// A watched Client whose clock runs 20% slow: its drift monitor flags
// every node, and redlock.drift.flagged and redlock.drift.out count them.
func TestDriftMetrics(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	reader, m := manualMetrics(t)
	c, err := redlock.NewFromURLs(harness.URLs(nodes), append(m.Options(), redlock.WithNodeTimeout(time.Second),
		redlock.WithClock(clock.Scaled(clock.Real(), 0.8)), redlock.WithDrift(redlock.Drift{Monitor: 20 * time.Millisecond}))...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m.Watch(c)
	guard := time.Now().Add(30 * time.Second) // a hang guard, not a speed check
	for c.Stats().Drift.Flagged < 3 {
		if time.Now().After(guard) {
			t.Fatalf("nodes not flagged: %+v", c.Stats().Drift)
		}
		time.Sleep(10 * time.Millisecond)
	}
	vals := metrictest.Collect(t, reader)
	if vals["redlock.drift.flagged{}"] != 3 || vals["redlock.drift.out{}"] != 3 {
		t.Fatalf("collected:\n%s", metrictest.Dump(vals))
	}
}
