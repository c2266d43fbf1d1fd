package chaos

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
)

// Availability under node restarts without persistence: 5 nodes, 6
// clients on one key, every client a TTL of 400 ms, each hold 20 ms. The
// nemesis SIGKILLs one node (single) every 600 ms, or three at once
// (majority) every 3 s, and starts them again, empty, 500 ms later
// (longer than the TTL). Every hold is an interval [acquired, released or
// deadline] on this process's monotonic clock; two holders' intervals
// that overlap are a violation. The figures go to the test log (and to
// RESTART_AVAIL_OUT, if set, as a Markdown table). RESTART_AVAIL_DURATION
// sets each run's length (default 5 s; the figures in docs/chaos.md are
// 15 s runs):
//
//	cd integration && RESTART_AVAIL_DURATION=15s go test -run TestRestartAvailability -v -count=1 ./chaos/
func TestRestartAvailability(t *testing.T) {
	dur := availDuration(t)
	type run struct {
		name, contender, faults string
	}
	runs := []run{
		{"no faults", "redlock", ""}, {"single restarts", "redlock", "single"}, {"single restarts", "redlock 1s", "single"},
		{"single restarts", "go-redsync", "single"}, {"majority restarts", "redlock", "majority"}, {"majority restarts", "redlock off", "majority"},
	}
	table := "| faults | contender | holds | vs no faults | overlaps |\n|---|---|---|---|---|\n"
	var base int
	for _, r := range runs {
		holds, overlaps := availabilityRun(t, r.contender, r.faults, dur, harness.Config{})
		if r.faults == "" {
			base = holds
		}
		ratio := float64(holds) / float64(max(base, 1))
		t.Logf("%-18s %-11s holds %4d (%.2f of no faults), overlaps %d", r.faults, r.contender, holds, ratio, overlaps)
		table += fmt.Sprintf("| %s | %s | %d | %.2f | %d |\n", r.name, r.contender, holds, ratio, overlaps)
		switch {
		case r.contender == "redlock off" || r.contender == "go-redsync":
			// no restart protection: overlaps are possible, not required
		case overlaps != 0:
			t.Errorf("%s, %s: %d overlapping holds", r.name, r.contender, overlaps)
		case r.contender == "redlock" && r.faults == "single" && ratio < 0.85 && dur >= 10*time.Second:
			t.Errorf("single restarts with default options: %d holds, %.2f of the %d without faults, want >= 0.85", holds, ratio, base)
		}
	}
	if out := os.Getenv("RESTART_AVAIL_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// availDuration is each availability run's length: RESTART_AVAIL_DURATION,
// default 5 s.
func availDuration(t *testing.T) time.Duration {
	s := os.Getenv("RESTART_AVAIL_DURATION")
	if s == "" {
		return 5 * time.Second
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// hold is one holder's interval on this process's monotonic clock.
type hold struct {
	who        int
	start, end time.Time
}

// tryer takes the key once: ok, the lock's deadline, and its release.
type tryer func(ctx context.Context) (ok bool, deadline time.Time, release func())

// availabilityRun runs the workload for dur with contender's clients
// under faults ("", "single", "majority") on nodes of cfg and returns
// holds and overlaps.
func availabilityRun(t *testing.T, contender, faults string, dur time.Duration, cfg harness.Config) (int, int) {
	nodes := harness.Start(t, 5, cfg)
	key := "avail:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	tryers := make([]tryer, 6)
	for i := range tryers {
		tryers[i] = newTryer(t, contender, nodes, key)
	}
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var mu sync.Mutex
	var holds []hold
	var wg sync.WaitGroup
	for i, try := range tryers {
		wg.Add(1)
		go func(i int, try tryer) {
			defer wg.Done()
			for ctx.Err() == nil {
				ok, deadline, release := try(ctx)
				if !ok {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				start := time.Now()
				time.Sleep(20 * time.Millisecond)
				end := time.Now()
				if deadline.Before(end) {
					end = deadline
				}
				release()
				mu.Lock()
				holds = append(holds, hold{i, start, end})
				mu.Unlock()
			}
		}(i, try)
	}
	nemesis(ctx, t, nodes, faults)
	wg.Wait()
	return len(holds), overlapsOf(holds)
}

// nemesis kills and restarts nodes until ctx ends (see
// TestRestartAvailability); every node is up again when it returns.
func nemesis(ctx context.Context, t *testing.T, nodes []*harness.Node, faults string) {
	if faults == "" {
		<-ctx.Done()
		return
	}
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	every, down, how := 600*time.Millisecond, 500*time.Millisecond, 1
	if faults == "majority" {
		every, how = 3*time.Second, 3
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(every - down):
		}
		victims := rng.Perm(len(nodes))[:how]
		for _, v := range victims {
			nodes[v].Kill()
		}
		time.Sleep(down)
		for _, v := range victims {
			if err := nodes[v].Up(); err != nil {
				t.Errorf("node %d up: %v", v, err)
			}
		}
	}
}

// overlapsOf counts pairs of intervals of different holders that overlap.
func overlapsOf(hs []hold) int {
	sort.Slice(hs, func(i, j int) bool { return hs[i].start.Before(hs[j].start) })
	n := 0
	for i := range hs {
		for j := i + 1; j < len(hs) && hs[j].start.Before(hs[i].end); j++ {
			if hs[j].who != hs[i].who {
				n++
			}
		}
	}
	return n
}

// newTryer makes one client of contender: "redlock" (default options),
// "redlock 1s" (WithRestartQuarantine(time.Second)), "redlock off"
// (quarantine off), "go-redsync" (v4, one try, expiry 400 ms).
func newTryer(t *testing.T, contender string, nodes []*harness.Node, key string) tryer {
	const ttl = 400 * time.Millisecond
	if contender == "go-redsync" {
		pools := make([]rsredis.Pool, len(nodes))
		for i, n := range nodes {
			cl := redis.NewClient(&redis.Options{Addr: n.Addr, DialTimeout: 50 * time.Millisecond, ReadTimeout: 50 * time.Millisecond, WriteTimeout: 50 * time.Millisecond, MaxRetries: -1})
			t.Cleanup(func() { cl.Close() })
			pools[i] = rsgoredis.NewPool(cl)
		}
		rs := redsync.New(pools...)
		return func(ctx context.Context) (bool, time.Time, func()) {
			m := rs.NewMutex(key, redsync.WithExpiry(ttl), redsync.WithTries(1))
			if err := m.TryLockContext(ctx); err != nil {
				return false, time.Time{}, nil
			}
			return true, m.Until(), func() { _, _ = m.Unlock() }
		}
	}
	var opts []redlock.Option
	switch contender {
	case "redlock 1s":
		opts = append(opts, redlock.WithRestartQuarantine(time.Second))
	case "redlock off":
		opts = append(opts, redlock.WithRestartQuarantine(redlock.QuarantineOff))
	case "redlock durable":
		opts = append(opts, redlock.WithDurableVotes())
	}
	c, err := harness.NewClient(t, harness.URLs(nodes), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return func(ctx context.Context) (bool, time.Time, func()) {
		l, err := c.TryLock(ctx, key, ttl)
		if err != nil {
			return false, time.Time{}, nil
		}
		return true, l.Deadline(), func() { _ = l.Release(context.Background()) }
	}
}
