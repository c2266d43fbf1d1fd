package redlockotel

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redlock-go/redlock/observe"
)

// BenchmarkTracerObserve: the cost of one acquisition's span with five
// node events, recorded and sampled out.
func BenchmarkTracerObserve(b *testing.B) {
	e := observe.Event{Context: context.Background(), Op: observe.OpAcquire, Keys: []string{"k"}, Attempts: 1,
		Elapsed: time.Millisecond, Remaining: 9 * time.Second, Nodes: nodes("yes", "yes", "yes", "no", "timeout")}
	for _, bc := range []struct {
		name    string
		sampler sdktrace.Sampler
	}{{"recorded", sdktrace.AlwaysSample()}, {"sampled_out", sdktrace.NeverSample()}} {
		b.Run(bc.name, func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(bc.sampler), sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
			defer tp.Shutdown(context.Background())
			tr := NewTracer(tp)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ { // not b.Loop: the module supports Go 1.22
				tr.Observe(e)
			}
		})
	}
}
