package core

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
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

// BenchmarkIndependent is the bench tool's independent-keys scenario as a
// go benchmark, for profiles: 64 goroutines, each its own key,
// TryLock+Release on five local nodes, with and without coalescing. Run:
//
//	cd integration && go test -run '^$' -bench Independent -benchtime 20000x -cpuprofile /tmp/cpu.out ./core/
func BenchmarkIndependent(b *testing.B) {
	for _, on := range []bool{true, false} {
		b.Run(fmt.Sprintf("coalescing-%v", on), func(b *testing.B) {
			nodes := harness.Start(b, 5, harness.Config{})
			opts := []redlock.Option{}
			if !on {
				opts = append(opts, redlock.WithoutCoalescing())
			}
			c := client(b, nodes, opts...)
			var g atomic.Int64
			var errs atomic.Int64
			b.SetParallelism(64 / runtime.GOMAXPROCS(0))
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				key := fmt.Sprintf("ind:%d", g.Add(1))
				ctx := context.Background()
				for pb.Next() {
					l, err := c.TryLock(ctx, key, 10*time.Second)
					if err == nil {
						err = l.Release(ctx)
					}
					if err != nil {
						errs.Add(1)
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(errs.Load()), "errors")
			_ = c.Close()
		})
	}
}
