package core

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/redlock-go/redlock/integration/harness"
)

// BenchmarkAcquireRelease measures one TryLock+Release cycle on five local
// nodes, healthy and with one node frozen by SIGSTOP (the call must return
// at quorum, not at the 50ms node timeout). It reports p50/p99 per cycle
// next to ns/op. Run:
//
//	cd integration && go test -run '^$' -bench AcquireRelease -benchtime 2000x -count 5 ./core/
func BenchmarkAcquireRelease(b *testing.B) {
	for _, frozen := range []bool{false, true} {
		name := "healthy"
		if frozen {
			name = "one-of-five-frozen"
		}
		b.Run(name, func(b *testing.B) {
			nodes := harness.Start(b, 5, harness.Config{})
			c := client(b, nodes)
			if frozen {
				nodes[4].Freeze()
				defer nodes[4].Thaw()
			}
			ctx := context.Background()
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				l, err := c.TryLock(ctx, "bench", 10*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			if frozen {
				nodes[4].Thaw()
			}
			_ = c.Close()
		})
	}
}
