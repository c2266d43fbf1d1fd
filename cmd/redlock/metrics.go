package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/redlock-go/redlock/redlockotel"
)

// demoMetrics feeds the demo's Client into redlockotel: a manual reader
// gives the live view and the summary their per-node failures, and with
// --metrics-addr a Prometheus endpoint serves the same instruments.
type demoMetrics struct {
	*redlockotel.Metrics
	reader   *sdkmetric.ManualReader
	provider *sdkmetric.MeterProvider
	srv      *http.Server
	URL      string
}

func startMetrics(addr string) (*demoMetrics, error) {
	d := &demoMetrics{reader: sdkmetric.NewManualReader()}
	opts := []sdkmetric.Option{sdkmetric.WithReader(d.reader)}
	var ln net.Listener
	reg := promclient.NewRegistry()
	if addr != "" {
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			return nil, usageErr("--metrics-addr: %v", err)
		}
		exp, err := prometheus.New(prometheus.WithRegisterer(reg))
		if err != nil {
			ln.Close()
			return nil, err
		}
		opts = append(opts, sdkmetric.WithReader(exp))
	}
	d.provider = sdkmetric.NewMeterProvider(opts...)
	m, err := redlockotel.New(redlockotel.WithMeterProvider(d.provider))
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		return nil, err
	}
	d.Metrics = m
	if ln != nil {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		d.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		d.URL = "http://" + ln.Addr().String() + "/metrics"
		go func() { _ = d.srv.Serve(ln) }()
	}
	return d, nil
}

// nodeFailures returns the failed node calls so far, per node address and
// error type (timeout, error).
func (d *demoMetrics) nodeFailures() map[string]map[string]int64 {
	var rm metricdata.ResourceMetrics
	out := map[string]map[string]int64{}
	if err := d.reader.Collect(context.Background(), &rm); err != nil {
		return out
	}
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			sum, ok := md.Data.(metricdata.Sum[int64])
			if md.Name != "redlock.node.errors" || !ok {
				continue
			}
			for _, p := range sum.DataPoints {
				host, _ := p.Attributes.Value(redlockotel.KeyServerAddress)
				port, _ := p.Attributes.Value(redlockotel.KeyServerPort)
				typ, _ := p.Attributes.Value(redlockotel.KeyErrorType)
				node := net.JoinHostPort(host.AsString(), port.Emit())
				if out[node] == nil {
					out[node] = map[string]int64{}
				}
				out[node][typ.AsString()] += p.Value
			}
		}
	}
	return out
}

func (d *demoMetrics) Close() error {
	var err error
	if d.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = d.srv.Shutdown(ctx)
		cancel()
	}
	return errors.Join(err, d.Metrics.Close(), d.provider.Shutdown(context.Background()))
}

// failureCells formats, per node in order, the failures since prev (and
// updates prev): "-" for none.
func failureCells(addrs []string, now, prev map[string]map[string]int64) []string {
	cells := make([]string, len(addrs))
	for i, a := range addrs {
		var n, p int64
		for _, v := range now[a] {
			n += v
		}
		for _, v := range prev[a] {
			p += v
		}
		cells[i] = "-"
		if n > p {
			cells[i] = fmt.Sprint(n - p)
		}
	}
	return cells
}
