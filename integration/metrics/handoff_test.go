package metrics

import (
	"context"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/redlockotel/metrictest"
)

// A watched Client's hand-off counters reach the instruments: a lock
// passed between two of its waiters, and the wait that the pass ended.
func TestHandoffMetrics(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	reader, m := manualMetrics(t)
	// A minute's backoff: the waiter's wait ends only by the pass.
	c, err := redlock.NewFromURLs(harness.URLs(nodes), append(m.Options(), redlock.WithRetryBackoff(time.Minute, time.Minute))...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m.Watch(c)
	ctx := context.Background()
	first, err := c.Lock(ctx, "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := c.Lock(ctx, "k", time.Minute)
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	guard := time.Now().Add(time.Minute)
	for c.Stats().Handoff.Waiting == 0 {
		if time.Now().After(guard) {
			t.Fatal("the second Lock did not queue")
		}
		time.Sleep(time.Millisecond)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	vals := metrictest.Collect(t, reader)
	if vals["redlock.handoff.passed{}"] != 1 || vals["redlock.handoff.wakeups{redlock.cause=timer}"] != 0 {
		t.Fatalf("collected:\n%s", metrictest.Dump(vals))
	}
}
