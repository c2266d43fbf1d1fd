package main

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe"
)

// The watchdog scenario's lease and renewal interval: short, so that a
// window of whole intervals is quick.
const (
	watchLease = 6 * time.Second
	watchEvery = 2 * time.Second
)

type watchCfg struct {
	locks     []int         // how many locks to hold, one measurement each
	lease     time.Duration // watchdog lease (go-redsync: expiry)
	every     time.Duration // renewal interval
	intervals int           // measurement window, in intervals
}

// watchPar is how many goroutines acquire (and release) the held locks;
// watchAcquire bounds the acquisition.
const (
	watchPar     = 64
	watchAcquire = time.Minute
)

// WatchStat is the cost of holding Locks locks that are renewed in the
// background, measured over a window of whole renewal intervals while
// they are held. Per-interval figures are the window's deltas scaled to
// one interval.
type WatchStat struct {
	Locks     int     `json:"locks"`
	LeaseMs   int64   `json:"lease_ms"`
	EveryMs   int64   `json:"every_ms"`
	WindowMs  float64 `json:"window_ms"`
	AcquireMs float64 `json:"acquire_ms"` // taking all the locks, watchPar at a time
	// NotAcquired is the locks not taken within watchAcquire (an
	// overloaded machine); the others are measured.
	NotAcquired int `json:"not_acquired"`
	// RoundTrips is the script calls (EVALSHA and EVAL: renewals; ours go
	// as one pipeline per node per tick, one call per 256 locks) the
	// busiest node served per interval.
	RoundTrips float64 `json:"round_trips_per_interval"`
	// Renewals is the renewals made per interval (by the client's count)
	// and RenewFailed those that failed during the run, Lost the locks
	// that ended before their release.
	Renewals    float64 `json:"renewals_per_interval"`
	RenewFailed int     `json:"renew_failed"`
	Lost        int     `json:"lost"`
	// CPUms is this process's CPU time (user+sys) per interval above
	// IdleCPUms, its CPU time per interval with no lock held.
	CPUms     float64 `json:"cpu_ms_per_interval"`
	IdleCPUms float64 `json:"idle_cpu_ms_per_interval"`
	// GoroutinesIdle is the fewest goroutines seen during the window
	// (sampled every 50 ms) above the fewest with no lock held;
	// GoroutinesPeak the most.
	GoroutinesIdle int `json:"goroutines_idle"`
	GoroutinesPeak int `json:"goroutines_peak"`
	// HeapPerLock and StackPerLock are the growth of the heap (after a
	// GC) and of goroutine stacks from before the locks were taken to
	// while they are held, divided by Locks.
	HeapPerLock  float64 `json:"heap_bytes_per_lock"`
	StackPerLock float64 `json:"stack_bytes_per_lock"`
}

// holder holds locks renewed in the background.
type holder interface {
	hold(ctx context.Context, key string) error
	// extendAll extends every held lock once (the warm-up, so that the
	// nodes know the renewal script before the measurement).
	extendAll(ctx context.Context)
	counts() (renewed, failed, lost int64)
	releaseAll()
	close()
}

// oursHolder holds Locks in watchdog mode.
type oursHolder struct {
	c                     *redlock.Client
	lease                 time.Duration
	mu                    sync.Mutex
	locks                 []*redlock.Lock
	renewed, failed, lost atomic.Int64
}

func newOursHolder(urls []string, w watchCfg) (*oursHolder, error) {
	h := &oursHolder{lease: w.lease}
	c, err := redlock.NewFromURLs(urls, redlock.WithWatchdog(w.lease, w.every), redlock.WithObserver(func(e observe.Event) {
		switch {
		case e.Op == "renew" && e.Err == nil:
			h.renewed.Add(1)
		case e.Op == "renew":
			h.failed.Add(1)
		case e.Op == "lost":
			h.lost.Add(1)
		}
	}))
	if err != nil {
		return nil, err
	}
	h.c = c
	return h, nil
}

func (h *oursHolder) hold(ctx context.Context, key string) error {
	l, err := h.c.Lock(ctx, key, redlock.Watchdog)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.locks = append(h.locks, l)
	h.mu.Unlock()
	return nil
}

func (h *oursHolder) extendAll(ctx context.Context) {
	h.mu.Lock()
	ls := h.locks
	h.mu.Unlock()
	inParallel(len(ls), func(i int) { _ = ls[i].Extend(ctx, h.lease) })
}

func (h *oursHolder) counts() (int64, int64, int64) {
	return h.renewed.Load(), h.failed.Load(), h.lost.Load()
}

func (h *oursHolder) releaseAll() {
	h.mu.Lock()
	ls := h.locks
	h.locks = nil
	h.mu.Unlock()
	inParallel(len(ls), func(i int) { _ = ls[i].Release(context.Background()) })
}

func (h *oursHolder) close() { _ = h.c.Close() }

// rsHolder holds go-redsync mutexes, each extended every interval by a
// goroutine of its own: go-redsync has no watchdog, and this is what its
// users write.
type rsHolder struct {
	r               *rsync
	w               watchCfg
	ctx             context.Context
	stop            context.CancelFunc
	wg              sync.WaitGroup
	mu              sync.Mutex
	mus             []*redsync.Mutex
	renewed, failed atomic.Int64
}

func newRsHolder(urls []string, w watchCfg) (*rsHolder, error) {
	r, err := newRsync(urls)
	if err != nil {
		return nil, err
	}
	h := &rsHolder{r: r, w: w}
	h.ctx, h.stop = context.WithCancel(context.Background())
	return h, nil
}

func (h *rsHolder) hold(ctx context.Context, key string) error {
	m := h.r.rs.NewMutex(key, redsync.WithExpiry(h.w.lease)) // its default tries and retry delays
	for {
		err := m.LockContext(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return err
		}
	}
	h.mu.Lock()
	h.mus = append(h.mus, m)
	h.mu.Unlock()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		t := time.NewTicker(h.w.every)
		defer t.Stop()
		for {
			select {
			case <-h.ctx.Done():
				return
			case <-t.C:
				if ok, err := m.ExtendContext(h.ctx); ok && err == nil {
					h.renewed.Add(1)
				} else if h.ctx.Err() == nil {
					h.failed.Add(1)
				}
			}
		}
	}()
	return nil
}

func (h *rsHolder) extendAll(ctx context.Context) {
	h.mu.Lock()
	ms := h.mus
	h.mu.Unlock()
	inParallel(len(ms), func(i int) { _, _ = ms[i].ExtendContext(ctx) })
}

func (h *rsHolder) counts() (int64, int64, int64) { return h.renewed.Load(), h.failed.Load(), 0 }

func (h *rsHolder) releaseAll() {
	h.stop()
	h.wg.Wait()
	h.mu.Lock()
	ms := h.mus
	h.mus = nil
	h.mu.Unlock()
	inParallel(len(ms), func(i int) { _, _ = ms[i].UnlockContext(context.Background()) })
}

func (h *rsHolder) close() { h.stop(); h.wg.Wait(); h.r.close() }

// inParallel calls fn(0..n-1), watchPar at a time.
func inParallel(n int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < min(n, watchPar); g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// watchdogCost holds n locks of lib ("redlock" or "redsync") on fresh
// keys and measures what holding them costs; see WatchStat.
func watchdogCost(lib string, urls []string, n int, w watchCfg) (WatchStat, error) {
	var h holder
	var err error
	switch lib {
	case "redlock":
		h, err = newOursHolder(urls, w)
	case "redsync":
		h, err = newRsHolder(urls, w)
	default:
		err = fmt.Errorf("unknown library %q", lib)
	}
	if err != nil {
		return WatchStat{}, err
	}
	defer h.close()
	info := make([]*redis.Client, len(urls))
	for i, u := range urls {
		opt, err := redis.ParseURL(u)
		if err != nil {
			return WatchStat{}, err
		}
		info[i] = redis.NewClient(opt)
		defer info[i].Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	prefix := fmt.Sprintf("wd:%s:%d:%d:", lib, n, time.Now().UnixNano())

	// Warm up: connect (go-redis starts and, on servers without
	// maintenance notifications, ends goroutines of its own), fill the
	// connection pools and load the scripts, so that the baseline has the
	// pools and the window no NOSCRIPT retries.
	if _, err := scriptCalls(ctx, info); err != nil {
		return WatchStat{}, err
	}
	inParallel(watchPar, func(i int) { _ = h.hold(ctx, fmt.Sprintf("%swarm:%d", prefix, i)) })
	h.extendAll(ctx)
	h.releaseAll()
	if rh, ok := h.(*rsHolder); ok { // releaseAll stopped its renewals: a fresh start
		rh.ctx, rh.stop = context.WithCancel(context.Background())
	}

	// Idle baseline: this process's CPU and goroutines with no lock held
	// (once the warm-up's last node calls are done), sampled the way the
	// window samples them.
	time.Sleep(200 * time.Millisecond)
	idle := watchSample(watchIdle)
	m0 := memNow()
	t0 := time.Now()
	// Taking the locks may fail on an overloaded machine: those not held
	// after watchAcquire are counted, the rest measured.
	actx, acancel := context.WithTimeout(ctx, watchAcquire)
	var notHeld atomic.Int64
	inParallel(n, func(i int) {
		if err := h.hold(actx, prefix+strconv.Itoa(i)); err != nil {
			notHeld.Add(1)
		}
	})
	acancel()
	acquired := time.Now()
	defer h.releaseAll()
	held := n - int(notHeld.Load())
	if held == 0 {
		return WatchStat{}, fmt.Errorf("no lock of %d acquired in %v", n, watchAcquire)
	}
	m1 := memNow()
	s := WatchStat{Locks: n, NotAcquired: n - held, LeaseMs: w.lease.Milliseconds(), EveryMs: w.every.Milliseconds(),
		AcquireMs:    float64(acquired.Sub(t0)) / float64(time.Millisecond),
		HeapPerLock:  float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc)) / float64(held),
		StackPerLock: float64(int64(m1.StackInuse)-int64(m0.StackInuse)) / float64(held)}

	// The window starts half an interval after the last acquisition (the
	// locks taken together are then renewed inside it, not on its edge)
	// and lasts whole intervals.
	time.Sleep(time.Until(acquired.Add(w.every / 2)))
	c0, err := scriptCalls(ctx, info)
	if err != nil {
		return WatchStat{}, err
	}
	r0, _, _ := h.counts()
	win := watchSample(time.Duration(w.intervals) * w.every)
	r1, failed, lost := h.counts()
	c1, err := scriptCalls(ctx, info)
	if err != nil {
		return WatchStat{}, err
	}
	perInterval := float64(w.every) / float64(win.dur)
	s.WindowMs = float64(win.dur) / float64(time.Millisecond)
	for i := range c1 {
		s.RoundTrips = max(s.RoundTrips, float64(c1[i]-c0[i])*perInterval)
	}
	s.Renewals = float64(r1-r0) * perInterval
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	s.IdleCPUms = ms(idle.cpu) * float64(w.every) / float64(idle.dur)
	s.CPUms = ms(win.cpu)*perInterval - s.IdleCPUms
	s.GoroutinesIdle, s.GoroutinesPeak = win.gmin-idle.gmin, win.gmax-idle.gmin
	s.RenewFailed, s.Lost = int(failed), int(lost)
	return s, nil
}

// watchIdle is how long the idle baseline is sampled.
const watchIdle = 400 * time.Millisecond

// watchSampled is what watchSample saw.
type watchSampled struct {
	dur, cpu   time.Duration // wall and CPU time (user+sys) of this process
	gmin, gmax int           // fewest and most goroutines
}

// watchSample watches this process for d: its CPU time, and its goroutines
// every 50 ms (from the calling goroutine, so that the sampling adds
// none).
func watchSample(d time.Duration) watchSampled {
	cpu0, start := cpuTime(), time.Now()
	end := start.Add(d)
	s := watchSampled{gmin: 1 << 30}
	for {
		g := runtime.NumGoroutine()
		s.gmin, s.gmax = min(s.gmin, g), max(s.gmax, g)
		left := time.Until(end)
		if left <= 0 {
			break
		}
		time.Sleep(min(50*time.Millisecond, left))
	}
	s.cpu, s.dur = cpuTime()-cpu0, time.Since(start)
	return s
}

// memNow reads the memory statistics after a full GC.
func memNow() runtime.MemStats {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// cpuTime is this process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// scriptCalls returns, per node, how many EVALSHA and EVAL calls it has
// served (INFO commandstats).
func scriptCalls(ctx context.Context, nodes []*redis.Client) ([]int64, error) {
	out := make([]int64, len(nodes))
	for i, c := range nodes {
		info, err := c.Info(ctx, "commandstats").Result()
		if err != nil {
			return nil, fmt.Errorf("INFO commandstats: %w", err)
		}
		out[i] = commandCalls(info, "evalsha") + commandCalls(info, "eval")
	}
	return out, nil
}

// commandCalls is the calls= count of cmdstat_<cmd> in an INFO
// commandstats reply; 0 if absent.
func commandCalls(info, cmd string) int64 {
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":")
		if !ok {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
	}
	return 0
}

// mergeWatch is the median of every figure over the runs; failures and
// losses are summed.
func mergeWatch(ws []WatchStat) WatchStat {
	m := func(f func(WatchStat) float64) float64 { return median(ws, f) }
	out := WatchStat{Locks: ws[0].Locks, LeaseMs: ws[0].LeaseMs, EveryMs: ws[0].EveryMs,
		WindowMs:       m(func(w WatchStat) float64 { return w.WindowMs }),
		AcquireMs:      m(func(w WatchStat) float64 { return w.AcquireMs }),
		RoundTrips:     m(func(w WatchStat) float64 { return w.RoundTrips }),
		Renewals:       m(func(w WatchStat) float64 { return w.Renewals }),
		CPUms:          m(func(w WatchStat) float64 { return w.CPUms }),
		IdleCPUms:      m(func(w WatchStat) float64 { return w.IdleCPUms }),
		GoroutinesIdle: int(m(func(w WatchStat) float64 { return float64(w.GoroutinesIdle) })),
		GoroutinesPeak: int(m(func(w WatchStat) float64 { return float64(w.GoroutinesPeak) })),
		HeapPerLock:    m(func(w WatchStat) float64 { return w.HeapPerLock }),
		StackPerLock:   m(func(w WatchStat) float64 { return w.StackPerLock })}
	for _, w := range ws {
		out.NotAcquired += w.NotAcquired
		out.RenewFailed += w.RenewFailed
		out.Lost += w.Lost
	}
	return out
}
