// Package metrictest reads what an OpenTelemetry SDK manual reader holds as
// a flat map, for tests of code instrumented with redlockotel.
package metrictest

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Collect reads r and returns one entry per data point, keyed
// "name{k=v,...}" with the attributes sorted: the value of int64 sums and
// gauges, the count of histograms (and their sum under the key with ":sum"
// appended). It fails tb if the reader does.
func Collect(tb testing.TB, r *sdkmetric.ManualReader) map[string]float64 {
	tb.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		tb.Fatal(err)
	}
	out := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			switch d := md.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[Key(md.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[Key(md.Name, p.Attributes)] = float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[Key(md.Name, p.Attributes)] = float64(p.Count)
					out[Key(md.Name, p.Attributes)+":sum"] = p.Sum
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					out[Key(md.Name, p.Attributes)] = float64(p.Count)
					out[Key(md.Name, p.Attributes)+":sum"] = float64(p.Sum)
				}
			}
		}
	}
	return out
}

// Key is the map key Collect uses for a data point.
func Key(name string, s attribute.Set) string {
	kv := make([]string, 0, s.Len())
	for _, a := range s.ToSlice() {
		kv = append(kv, string(a.Key)+"="+a.Value.Emit())
	}
	sort.Strings(kv)
	return name + "{" + strings.Join(kv, ",") + "}"
}

// Dump formats what Collect returned, one sorted line per entry, for a
// failing test's log.
func Dump(m map[string]float64) string {
	lines := make([]string, 0, len(m))
	for k, v := range m {
		lines = append(lines, fmt.Sprintf("%s = %g", k, v))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
