package redlockotel_test

import (
	"context"
	"errors"
	"log"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlockotel"
)

// Wiring the metrics to a Prometheus scrape endpoint: the OpenTelemetry
// Prometheus exporter is the SDK's reader, redlockotel feeds the Client's
// observer hook, and promhttp serves /metrics (redlock_acquire_duration_seconds,
// redlock_node_errors_total, redlock_locks_held, ...).
func Example_prometheus() {
	exporter, err := prometheus.New() // registers with prometheus.DefaultRegisterer
	if err != nil {
		log.Fatal(err)
	}
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer provider.Shutdown(context.Background())

	m, err := redlockotel.New(redlockotel.WithMeterProvider(provider))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	c, err := redlock.NewFromURLs([]string{
		"redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003",
		"redis://127.0.0.1:7004", "redis://127.0.0.1:7005",
	}, m.Options()...)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	http.Handle("/metrics", promhttp.Handler())
	srv := &http.Server{Addr: "127.0.0.1:9464", ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Print(err)
		}
	}()
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := c.Lock(ctx, "stock:sku-42", 10*time.Second)
	if err != nil {
		log.Print(err) // counted under redlock_acquire_duration_seconds{redlock_outcome="..."}
		return
	}
	defer l.Release(context.Background())
	// ... the critical section, within l.Deadline() ...
}

// Tracing next to the metrics: every Lock, Extend and Release becomes a
// span (redlock.acquire, redlock.extend, redlock.release) under the
// caller's span, with one event per node. tp is the application's
// TracerProvider (the SDK's, with its exporter); nil uses the global one.
func ExampleNewTracer() {
	var tp trace.TracerProvider // e.g. sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter))
	m, err := redlockotel.New()
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	tr := redlockotel.NewTracer(tp)
	c, err := redlock.NewFromURLs([]string{
		"redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003",
		"redis://127.0.0.1:7004", "redis://127.0.0.1:7005",
	}, append(m.Options(), tr.Options()...)...)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx, span := otel.Tracer("app").Start(context.Background(), "restock")
	defer span.End()
	l, err := c.Lock(ctx, "stock:sku-42", 10*time.Second) // a redlock.acquire span under "restock"
	if err != nil {
		return
	}
	defer l.Release(ctx)
}
