package core

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"sync"
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

// BenchmarkHeldLocks measures the heap that held watchdog locks keep
// (the bench tool's "heap per lock" at 10000 locks): b.N locks on five
// local nodes, taken 64 at a time, then a full GC; it reports the heap
// growth per held lock. With HELD_HEAP_PROFILE=FILE it also writes the
// heap profile of that moment (go tool pprof -sample_index=inuse_space).
// The acquisitions' round stragglers are waited for (Client.Close would
// end the locks): a settle delay before the GC. Run:
//
//	cd integration && go test -run '^$' -bench HeldLocks -benchtime 10000x ./core/
func BenchmarkHeldLocks(b *testing.B) {
	nodes := harness.Start(b, 5, harness.Config{})
	c := client(b, nodes, redlock.WithWatchdog(6*time.Second, 2*time.Second))
	ctx := context.Background()
	hold := func(prefix string, n int) []*redlock.Lock {
		ls := make([]*redlock.Lock, n)
		var next atomic.Int64
		var wg sync.WaitGroup
		for g := 0; g < 64; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
					l, err := c.Lock(ctx, fmt.Sprintf("%s:%d", prefix, i), redlock.Watchdog)
					if err != nil {
						b.Error(err)
						return
					}
					ls[i] = l
				}
			}()
		}
		wg.Wait()
		return ls
	}
	release := func(ls []*redlock.Lock) {
		for _, l := range ls {
			if l != nil {
				_ = l.Release(ctx)
			}
		}
	}
	release(hold(fmt.Sprintf("warm:%d", b.N), 64)) // pools filled, scripts loaded
	time.Sleep(200 * time.Millisecond)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	b.ResetTimer()
	ls := hold(fmt.Sprintf("held:%d", b.N), b.N)
	b.StopTimer()
	time.Sleep(200 * time.Millisecond) // late answers of the last rounds
	runtime.GC()
	runtime.ReadMemStats(&m1)
	if f := os.Getenv("HELD_HEAP_PROFILE"); f != "" {
		w, err := os.Create(f)
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.Lookup("heap").WriteTo(w, 0); err != nil {
			b.Fatal(err)
		}
		_ = w.Close()
	}
	b.ReportMetric(float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc))/float64(b.N), "heap-B/lock")
	release(ls)
}

// BenchmarkUncontendedNodes is one caller's TryLock+Release on 1 and 3
// local nodes (BenchmarkAcquireRelease has 5), for CPU profiles of the
// bench tool's uncontended rows. Run:
//
//	cd integration && go test -run '^$' -bench UncontendedNodes/1 -benchtime 5000x -cpuprofile /tmp/cpu.out ./core/
func BenchmarkUncontendedNodes(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			nodes := harness.Start(b, n, harness.Config{})
			c := client(b, nodes)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				l, err := c.TryLock(ctx, "bench", 10*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			_ = c.Close()
		})
	}
}
