package core

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
)

// shareSpan is how long each run of TestMigrationShare lasts:
// MIGRATION_SHARE_SPAN (a Go duration, e.g. 15s, the long mode) or 6 s.
func shareSpan(t *testing.T) time.Duration {
	s := os.Getenv("MIGRATION_SHARE_SPAN")
	if s == "" {
		return 6 * time.Second
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		t.Fatalf("MIGRATION_SHARE_SPAN=%q: want a positive duration such as 15s", s)
	}
	return d
}

// shareSide is what one side of a shared key did in a run.
type shareSide struct {
	mu     sync.Mutex
	holds  int
	failed []error         // lock calls that returned an error before the run ended
	waits  []time.Duration // from a lock call to its hold
}

func (s *shareSide) record(wait time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.failed = append(s.failed, err)
		return
	}
	s.holds++
	s.waits = append(s.waits, wait)
}

// reset forgets what the side did so far.
func (s *shareSide) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holds, s.failed, s.waits = 0, nil, nil
}

// count is how many holds the side has had.
func (s *shareSide) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holds
}

// foundHandler is a slog handler that notes the Client's warning that it
// found a foreign value.
type foundHandler struct{ found *atomic.Bool }

func (h foundHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h foundHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "written by another library") {
		h.found.Store(true)
	}
	return nil
}
func (h foundHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h foundHandler) WithGroup(string) slog.Handler      { return h }

// quantile returns the q-quantile of the side's waits (0 if none).
func (s *shareSide) quantile(q float64) time.Duration {
	if len(s.waits) == 0 {
		return 0
	}
	w := slices.Clone(s.waits)
	slices.Sort(w)
	return w[min(len(w)-1, int(q*float64(len(w))))]
}

func (s *shareSide) String() string {
	return fmt.Sprintf("holds %d, failed calls %d, wait p50 %v p99 %v",
		s.holds, len(s.failed), s.quantile(0.5).Round(100*time.Microsecond), s.quantile(0.99).Round(100*time.Microsecond))
}

// Old instances (go-redsync v4 at its defaults: 32 tries, 50-250 ms
// apart) and a new one (this library at its defaults) share one key on
// five nodes during a rolling migration, 4 goroutines on each side, each
// in a loop: lock (8 s TTL), hold, release, lock again. No two holders
// overlap. With 1 ms holds neither side starves the other: each gets at
// least a fifth of the holds (checked in the long mode, whose sample is
// large enough), and no go-redsync lock call fails (it gives up after its
// 32 tries: a turn that never came). With 300 ms holds
// go-redsync's own goroutines starve each other (the one that releases
// takes the key straight back, about a round trip later, before any
// poller, its own or ours, can try), so some of its calls fail with no
// new instance at all, and a poller gets the key only when such a chain
// breaks: a second go-redsync instance got 2 to 44 of 50 holds in 15 s.
// There the shares are logged, not held to a fifth, and the mixed fleet
// may fail no more go-redsync calls than go-redsync alone does (two
// instances of 4 goroutines, the control), give or take two. MIGRATION_SHARE_SPAN=15s runs the long
// mode (the figures in docs/migration.md); the default is 6 s (a
// go-redsync call gives up after about 5 s).
func TestMigrationShare(t *testing.T) {
	span := shareSpan(t)
	for _, hold := range []time.Duration{time.Millisecond, 300 * time.Millisecond} {
		t.Run(fmt.Sprintf("hold %v", hold), func(t *testing.T) {
			olds, news, overlaps := shareRun(t, hold, span, true)
			t.Logf("%v holds: go-redsync %v; redlock %v; overlaps %d", hold, olds, news, overlaps)
			// go-redsync calls that may fail; each side's fifth of the holds
			// is held in the long mode only: a 6 s run under -race beside
			// other suites is too short a sample (15.6 % in one CI run).
			allowed, fifth := 0, os.Getenv("MIGRATION_SHARE_SPAN") != ""
			if hold > 100*time.Millisecond {
				a, b, _ := shareRun(t, hold, span, false)
				t.Logf("%v holds, go-redsync alone (control, 4 goroutines per Redsync): %v; %v", hold, a, b)
				allowed, fifth = max(len(a.failed), len(b.failed))+2, false
			}
			total := olds.holds + news.holds
			switch {
			case overlaps != 0:
				t.Errorf("%d overlapping holds", overlaps)
			case len(olds.failed) > allowed:
				t.Errorf("%d go-redsync lock calls failed (a turn that did not come within its 32 tries), want at most %d, first: %v", len(olds.failed), allowed, olds.failed[0])
			case len(news.failed) > 0:
				t.Errorf("%d redlock lock calls failed, first: %v", len(news.failed), news.failed[0])
			case fifth && 5*olds.holds < total:
				t.Errorf("go-redsync got %d of %d holds, want at least a fifth", olds.holds, total)
			case fifth && 5*news.holds < total:
				t.Errorf("redlock got %d of %d holds, want at least a fifth", news.holds, total)
			}
		})
	}
}

// shareRun runs two sides on one key for span with holds of hold: 4
// goroutines of go-redsync (olds) and 4 of a Client (news), or, without
// withNew, 4 more of go-redsync on a Redsync of their own in its place.
func shareRun(t *testing.T, hold, span time.Duration, withNew bool) (olds, news *shareSide, overlaps int64) {
	const workers = 4
	nodes := harness.Start(t, 5, harness.Config{})
	var found atomic.Bool // the Client found go-redsync's value under the key (its warning)
	c := client(t, nodes, redlock.WithLogger(slog.New(foundHandler{&found})))
	ctx, cancel := context.WithTimeout(context.Background(), span)
	defer cancel()
	olds, news = &shareSide{}, &shareSide{}
	var inside, over atomic.Int64
	critical := func() {
		if inside.Add(1) != 1 {
			over.Add(1)
		}
		time.Sleep(hold)
		inside.Add(-1)
	}
	old := func(rs *redsync.Redsync, side *shareSide) {
		m := rs.NewMutex("mig:share", redsync.WithExpiry(8*time.Second))
		for ctx.Err() == nil {
			start := time.Now()
			err := m.LockContext(ctx)
			if ctx.Err() != nil {
				if err == nil {
					_, _ = m.UnlockContext(context.Background())
				}
				return
			}
			side.record(time.Since(start), err)
			if err == nil {
				critical()
				_, _ = m.UnlockContext(context.Background())
			}
		}
	}
	new := func() {
		for ctx.Err() == nil {
			start := time.Now()
			l, err := c.Lock(ctx, "mig:share", 8*time.Second)
			if ctx.Err() != nil {
				if err == nil {
					_ = l.Release(context.Background())
				}
				return
			}
			news.record(time.Since(start), err)
			if err == nil {
				critical()
				_ = l.Release(context.Background())
			}
		}
	}
	rs, other := redsync.New(redsyncPools(t, nodes)...), redsync.New(redsyncPools(t, nodes)...)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() { defer wg.Done(); old(rs, olds) }()
	}
	// A roll starts with the old instances at work: the new side comes
	// once they hold the key, and its share is measured from when the
	// Client has found their value under it (a TryLock refused by one of
	// their holds); before that it cannot tell their waiters are there.
	for start := time.Now(); olds.count() == 0 && time.Since(start) < time.Second; {
		time.Sleep(time.Millisecond)
	}
	for start := time.Now(); withNew && !found.Load(); time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("the Client did not find go-redsync's value under the key in 5 s of TryLocks")
		}
		if l, err := c.TryLock(ctx, "mig:share", time.Second); err == nil {
			_ = l.Release(ctx)
		}
	}
	olds.reset() // counted from here on
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if withNew {
				new()
			} else {
				old(other, news)
			}
		}()
	}
	wg.Wait()
	return olds, news, over.Load()
}
