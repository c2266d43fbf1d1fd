package metrics

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/redlockotel"
)

// TestTracingAgainstRealNodes: goroutines, each under a span of its own,
// lock, extend and release their own keys at once on one Client with
// coalescing on (the default: their node calls share pipelines). Every
// redlock span must be a child of its goroutine's span, with the op's
// name, one event per node and a fencing token; a contended TryLock's
// span has an Error status.
func TestTracingAgainstRealNodes(t *testing.T) {
	nodes := harness.Start(t, 5, harness.Config{})
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	defer tp.Shutdown(context.Background())
	callers := tp.Tracer("test")
	c, err := redlock.NewFromURLs(harness.URLs(nodes),
		// A 1s node timeout, and 10s TTLs (the node timeout is capped at
		// TTL/10): healthy nodes do not time out on a loaded machine.
		append(redlockotel.NewTracer(tp).Options(), redlock.WithNodeTimeout(time.Second), redlock.WithFencing())...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bg := context.Background()

	// The contended TryLock, under a span of its own.
	held, err := c.TryLock(bg, "held", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cctx, contender := callers.Start(bg, "contender")
	if _, err := c.TryLock(cctx, "held", 10*time.Second); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("TryLock of a held key: %v", err)
	}
	contender.End()

	const workers, rounds = 8, 10
	parents := map[trace.SpanID]string{contender.SpanContext().SpanID(): "contender"}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("worker-%d", w)
			ctx, span := callers.Start(bg, name)
			defer span.End()
			mu.Lock()
			parents[span.SpanContext().SpanID()] = name
			mu.Unlock()
			for range rounds {
				l, err := c.Lock(ctx, name, 10*time.Second)
				if err == nil {
					err = l.Extend(ctx, 10*time.Second)
				}
				if err == nil {
					err = l.Release(ctx)
				}
				if err != nil {
					errs <- fmt.Errorf("%s: %w", name, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := held.Release(bg); err != nil {
		t.Fatal(err)
	}
	c.Close()

	// By parent and span name: how many spans.
	count := map[string]int{}
	for _, s := range sr.Ended() {
		if !strings.HasPrefix(s.Name(), "redlock.") {
			continue
		}
		parent, ok := parents[s.Parent().SpanID()]
		if !s.Parent().IsValid() {
			parent, ok = "none", true
		}
		if !ok {
			t.Errorf("%s span: parent %v is no caller's span", s.Name(), s.Parent().SpanID())
			continue
		}
		count[parent+" "+s.Name()]++
		for _, ev := range s.Events() { // healthy nodes: one slower than the quorum is pending, not an error
			if ea := attribute.NewSet(ev.Attributes...); ea.HasValue(redlockotel.KeyErrorType) {
				t.Errorf("%s span under %s: node event with error.type on healthy nodes: %v", s.Name(), parent, ev.Attributes)
			}
		}
		if n := len(s.Events()); n != len(nodes) {
			t.Errorf("%s span under %s: %d node events, want %d", s.Name(), parent, n, len(nodes))
		}
		attrs := attribute.NewSet(s.Attributes()...)
		tok, _ := attrs.Value(redlockotel.KeyToken)
		switch {
		case parent == "contender":
			// The key held by another client is TryLock's expected answer,
			// not a failure: no Error status, no error.type.
			need, _ := attrs.Value(redlockotel.KeyNeed)
			got, _ := attrs.Value(redlockotel.KeyGot)
			outcome, _ := attrs.Value(redlockotel.KeyOutcome)
			if s.Status().Code != codes.Unset || attrs.HasValue(redlockotel.KeyErrorType) || outcome.AsString() != "held" ||
				need.AsInt64() != 3 || got.AsInt64() != 0 {
				t.Errorf("contended TryLock span: status %v, outcome %v, need %v, got %v", s.Status(), outcome.Emit(), need.Emit(), got.Emit())
			}
		case s.Status().Code != codes.Unset:
			t.Errorf("%s span under %s: status %v", s.Name(), parent, s.Status())
		case s.Name() == "redlock.acquire" && tok.AsInt64() <= 0:
			t.Errorf("%s span under %s: token %v", s.Name(), parent, tok.Emit())
		}
	}
	want := map[string]int{"contender redlock.acquire": 1, "none redlock.acquire": 1, "none redlock.release": 1}
	for w := range workers {
		for _, op := range []string{"acquire", "extend", "release"} {
			want[fmt.Sprintf("worker-%d redlock.%s", w, op)] = rounds
		}
	}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("%s: %d spans, want %d", k, count[k], n)
		}
	}
	if len(count) != len(want) {
		t.Errorf("spans by parent and name: %v, want %v", count, want)
	}
}
