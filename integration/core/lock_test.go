package core

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/clock"
	"github.com/redlock-go/redlock/integration/harness"
)

func TestLockUnlock(t *testing.T) {
	for _, n := range []int{1, 3, 5} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			c, nodes := setup(t, n)
			ctx := context.Background()
			l, err := c.Lock(ctx, "res", 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if r := l.Remaining(); r <= 4*time.Second || r > 5*time.Second {
				t.Fatalf("Remaining = %v", r)
			}
			vals, ttls := raw(t, nodes, "res")
			if got := count(vals, l.Owner()); got < c.Quorum() {
				t.Fatalf("owner on %d nodes, quorum %d: %v", got, c.Quorum(), vals)
			}
			for i, d := range ttls {
				if vals[i] != "" && (d <= 0 || d > 5*time.Second) {
					t.Fatalf("node %d PTTL %v", i, d)
				}
			}
			if _, err := c.TryLock(ctx, "res", time.Second); !errors.Is(err, redlock.ErrNotObtained) {
				t.Fatalf("second TryLock: %v", err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctx); !errors.Is(err, redlock.ErrNotHeld) {
				t.Fatalf("double release: %v", err)
			}
			if vals, _ := raw(t, nodes, "res"); count(vals, "") != n {
				t.Fatalf("keys left after release: %v", vals)
			}
			l2, err := c.TryLock(ctx, "res", time.Second)
			if err != nil {
				t.Fatalf("relock after release: %v", err)
			}
			if l2.Owner() == l.Owner() {
				t.Fatal("owner value reused across acquisitions")
			}
			_ = l2.Release(ctx)
		})
	}
}

// Many goroutines, several clients, one key: never two holders at once.
func TestContentionNoOverlap(t *testing.T) {
	nodes := harness.Start(t, 5, harness.Config{})
	clients := []*redlock.Client{client(t, nodes), client(t, nodes), client(t, nodes)}
	var holders, maxHolders, acquired atomic.Int32
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for w := 0; w < 24; w++ {
		wg.Add(1)
		go func(c *redlock.Client) {
			defer wg.Done()
			for ctx.Err() == nil {
				l, err := c.Lock(ctx, "hot", time.Second)
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("Lock: %v", err)
					}
					return
				}
				h := holders.Add(1)
				for {
					m := maxHolders.Load()
					if h <= m || maxHolders.CompareAndSwap(m, h) {
						break
					}
				}
				acquired.Add(1)
				time.Sleep(200 * time.Microsecond)
				holders.Add(-1)
				if err := l.Release(context.Background()); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		}(clients[w%len(clients)])
	}
	wg.Wait()
	for _, c := range clients {
		c.Close() // waits for release calls still finishing after quorum
	}
	if maxHolders.Load() != 1 {
		t.Fatalf("%d holders at once", maxHolders.Load())
	}
	if acquired.Load() < 50 {
		t.Fatalf("only %d acquisitions in 3s", acquired.Load())
	}
	if vals, _ := raw(t, nodes, "hot"); count(vals, "") != len(nodes) {
		t.Fatalf("leftover keys: %v", vals)
	}
	t.Logf("%d acquisitions", acquired.Load())
}

// A frozen node must not slow acquisition down to the node timeout: the
// call returns at quorum.
func TestFrozenNodeDoesNotSlowAcquire(t *testing.T) {
	for _, honors := range []bool{true, false} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", honors), func(t *testing.T) {
			nodes := harness.Start(t, 5, harness.Config{})
			var clients []redis.UniversalClient
			for _, n := range nodes {
				rt := 3 * time.Second
				if honors {
					rt = 20 * time.Second // the node deadline, not this, must end the calls
				}
				cl := redis.NewClient(&redis.Options{Addr: n.Addr, ContextTimeoutEnabled: honors, ReadTimeout: rt})
				clients = append(clients, cl)
			}
			c, err := redlock.New(clients, redlock.WithNodeTimeout(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			nodes[2].Freeze()
			var worst time.Duration
			for i := 0; i < 20; i++ {
				start := time.Now()
				l, err := c.TryLock(context.Background(), "k", 30*time.Second)
				if err != nil {
					// Say what the live nodes hold, to tell a leftover of
					// an earlier round from a foreign server on the port.
					live := append(append([]*harness.Node{}, nodes[:2]...), nodes[3:]...)
					vals, ttls := raw(t, live, "k")
					t.Fatalf("round %d: %v; nodes 0,1,3,4 now hold %q (PTTL %v)", i, err, vals, ttls)
				}
				if err := l.Release(context.Background()); err != nil {
					t.Fatal(err)
				}
				if d := time.Since(start); d > worst {
					worst = d
				}
			}
			// 1s is the node timeout: returning well before it shows the
			// call does not wait for the frozen node.
			if worst > 500*time.Millisecond {
				t.Fatalf("worst acquire+release with a frozen node: %v (node timeout 1s)", worst)
			}
			// Close waits for the stragglers: each frozen-node call ends at
			// the 1s node deadline, and the release there (and the late
			// clean-up) at the release deadline, min(10 x 1s, TTL/4) =
			// 7.5s. With ContextTimeoutEnabled these deadlines reach the
			// socket, before the 20s ReadTimeout; without it the commands
			// run to the client's 3s ReadTimeout.
			closeStart := time.Now()
			c.Close()
			if honors && time.Since(closeStart) > 15*time.Second {
				t.Fatalf("stragglers outlived the node deadline: Close took %v", time.Since(closeStart))
			}
			nodes[2].Thaw()
			for _, cl := range clients {
				cl.Close()
			}
			t.Logf("worst acquire+release with one of five frozen: %v", worst)
		})
	}
}

func TestDeadMinorityTolerated(t *testing.T) {
	c, nodes := setup(t, 5)
	nodes[0].Kill()
	nodes[4].Kill()
	l, err := c.TryLock(context.Background(), "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	res := l.Nodes()
	if res[0].Err == nil || res[4].Err == nil {
		t.Errorf("dead nodes reported no error: %+v", res)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestDeadMajorityFailsFastAndClearly(t *testing.T) {
	c, nodes := setup(t, 5, redlock.WithNodeTimeout(time.Second))
	for _, i := range []int{0, 1, 2} {
		nodes[i].Kill()
	}
	start := time.Now()
	_, err := c.TryLock(context.Background(), "k", 10*time.Second)
	elapsed := time.Since(start)
	var qe *redlock.QuorumError
	if !errors.Is(err, redlock.ErrNotObtained) || !errors.As(err, &qe) {
		t.Fatalf("err = %v", err)
	}
	failed := 0
	for _, n := range qe.Nodes {
		if n.Err != nil && !errors.Is(n.Err, redlock.ErrPending) {
			failed++
		}
	}
	if failed < 2 || qe.Got > 2 {
		t.Fatalf("per-node detail does not show the dead nodes: %v", err)
	}
	if elapsed > 500*time.Millisecond {
		t.Fatalf("took %v to fail with dead nodes (refused connections)", elapsed)
	}
	// Lock keeps retrying and ends with ctx's error.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = c.Lock(ctx, "k", 10*time.Second)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("Lock with dead majority: %v", err)
	}
	if vals, _ := raw(t, nodes[3:], "k"); count(vals, "") != 2 {
		t.Fatalf("failed attempts left keys on the live nodes: %v", vals)
	}
}

func TestCancelledLockReturnsCtxError(t *testing.T) {
	c, _ := setup(t, 3)
	holder, err := c.Lock(context.Background(), "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = c.Lock(ctx, "k", time.Second)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("err = %v", err)
	}
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) || qe.Attempts < 2 {
		t.Fatalf("expected retries before cancel: %v", err)
	}
}

func TestExtend(t *testing.T) {
	c, nodes := setup(t, 3)
	ctx := context.Background()
	l, err := c.Lock(ctx, "k", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	before := l.Deadline()
	time.Sleep(50 * time.Millisecond)
	if err := l.Extend(ctx, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if !l.Deadline().After(before) || l.Remaining() < 1500*time.Millisecond {
		t.Fatalf("deadline not moved: %v -> %v (%v left)", before, l.Deadline(), l.Remaining())
	}
	_, ttls := raw(t, nodes, "k")
	for i, d := range ttls {
		if d < time.Second {
			t.Fatalf("node %d PTTL %v after extend to 2s", i, d)
		}
	}
	if err := l.Extend(ctx, time.Millisecond); !errors.Is(err, redlock.ErrInvalidArgument) {
		t.Fatalf("extend with ttl inside the drift budget: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, time.Second); !errors.Is(err, redlock.ErrNotHeld) {
		t.Fatalf("extend after release: %v", err)
	}
}

// Extend after expiry fails and never re-creates the lock, with or without
// a new holder.
func TestExtendAfterExpiry(t *testing.T) {
	c, nodes := setup(t, 5)
	ctx := context.Background()
	a, err := c.Lock(ctx, "k", 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	if err := a.Extend(ctx, 5*time.Second); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("extend of expired lock: %v", err)
	}
	if vals, _ := raw(t, nodes, "k"); count(vals, "") != 5 {
		t.Fatalf("extend re-created the lock: %v", vals)
	}

	// Expired and taken over: the node-side check must refuse too, even
	// when the client thinks it is still valid (drift factor large enough
	// to keep our deadline, node keys gone). Simulate by overwriting.
	a, err = c.Lock(ctx, "k2", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes[:3] {
		set(t, n, "k2", "intruder", 5*time.Second)
	}
	err = a.Extend(ctx, 5*time.Second)
	if !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("extend of stolen lock: %v", err)
	}
	if a.Remaining() != 0 {
		t.Fatalf("lost lock still reports %v remaining", a.Remaining())
	}
	vals, _ := raw(t, nodes, "k2")
	if count(vals, "intruder") != 3 {
		t.Fatalf("new holder disturbed: %v", vals)
	}
}

// A's lock expired, B took it, A releases: B's lock is untouched.
func TestStaleReleaseLeavesNewHolder(t *testing.T) {
	c, nodes := setup(t, 5)
	ctx := context.Background()
	a, err := c.Lock(ctx, "k", 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	b, err := c.TryLock(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	err = a.Release(ctx)
	var qe *redlock.QuorumError
	if !errors.Is(err, redlock.ErrNotHeld) || !errors.As(err, &qe) || len(qe.Nodes) != 5 {
		t.Fatalf("stale release: %v", err)
	}
	vals, _ := raw(t, nodes, "k")
	if count(vals, b.Owner()) != 5 {
		t.Fatalf("B's lock disturbed by A's release: %v", vals)
	}
	if err := b.Extend(ctx, 5*time.Second); err != nil {
		t.Fatalf("B lost its lock: %v", err)
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A failed attempt leaves no key of ours on any node.
func TestFailedAttemptLeavesNoKey(t *testing.T) {
	c, nodes := setup(t, 5)
	for _, n := range nodes[:3] {
		set(t, n, "k", "other", 5*time.Second)
	}
	_, err := c.TryLock(context.Background(), "k", 5*time.Second)
	if !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("err = %v", err)
	}
	vals, _ := raw(t, nodes, "k")
	if count(vals, "other") != 3 || count(vals, "") != 2 {
		t.Fatalf("failed attempt left keys: %v", vals)
	}
}

// A pause during acquisition (here: the client's clock jumps past the TTL
// while the round runs) makes the attempt fail and clean up every node.
func TestPauseDuringAcquisitionFails(t *testing.T) {
	jc := &jumpClock{Clock: clock.Real()}
	c, nodes := setup(t, 5, redlock.WithClock(jc))
	jc.jump.Store(int64(2 * time.Second)) // every reading lands 2s later
	_, err := c.TryLock(context.Background(), "k", time.Second)
	var qe *redlock.QuorumError
	if !errors.Is(err, redlock.ErrNotObtained) || !errors.As(err, &qe) || qe.Got < qe.Need || qe.Validity > 0 {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "validity ran out") {
		t.Fatalf("message does not say why: %v", err)
	}
	if vals, _ := raw(t, nodes, "k"); count(vals, "") != 5 {
		t.Fatalf("keys left after a too-late quorum: %v", vals)
	}
}

// jumpClock adds a growing offset on every reading after the first.
type jumpClock struct {
	clock.Clock
	jump atomic.Int64
	mu   sync.Mutex
	off  time.Duration
}

func (j *jumpClock) Now() time.Time {
	j.mu.Lock()
	defer j.mu.Unlock()
	t := j.Clock.Now().Add(j.off)
	j.off += time.Duration(j.jump.Load())
	return t
}

func TestMultiKeyAllOrNothing(t *testing.T) {
	c, nodes := setup(t, 3)
	ctx := context.Background()
	l, err := c.LockKeys(ctx, []string{"acct:A", "acct:B"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryLock(ctx, "acct:B", time.Second); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("single key of a multi-lock obtained: %v", err)
	}
	if err := l.Extend(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// B held elsewhere: locking A+B fails and leaves no A behind.
	for _, n := range nodes {
		set(t, n, "acct:B", "other", 5*time.Second)
	}
	if _, err := c.TryLockKeys(ctx, []string{"acct:A", "acct:B"}, 5*time.Second); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("err = %v", err)
	}
	if vals, _ := raw(t, nodes, "acct:A"); count(vals, "") != 3 {
		t.Fatalf("partial multi-lock left behind: %v", vals)
	}
}

func TestQuorumModes(t *testing.T) {
	nodes := harness.Start(t, 5, harness.Config{})
	all := client(t, nodes, redlock.WithQuorum(redlock.AllNodes))
	four := client(t, nodes, redlock.WithQuorum(redlock.AtLeast(4)))
	ctx := context.Background()
	l, err := all.TryLock(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
	nodes[4].Kill()
	if _, err := all.TryLock(ctx, "k", time.Second); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("AllNodes with a dead node: %v", err)
	}
	l, err = four.TryLock(ctx, "k", time.Second)
	if err != nil {
		t.Fatalf("AtLeast(4) with 4 alive: %v", err)
	}
	_ = l.Release(ctx)
	nodes[3].Kill()
	if _, err := four.TryLock(ctx, "k", time.Second); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("AtLeast(4) with 3 alive: %v", err)
	}
}

// Scripts are cached with EVALSHA; after SCRIPT FLUSH (or a restart) the
// NOSCRIPT fallback loads them again.
func TestNoScriptFallback(t *testing.T) {
	c, nodes := setup(t, 3)
	ctx := context.Background()
	l, err := c.Lock(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		rc := n.Client()
		if err := rc.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		rc.Close()
	}
	if err := l.Extend(ctx, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestLoggerAndObserver(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&syncWriter{w: &buf, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var events []redlock.Event
	var emu sync.Mutex
	c, _ := setup(t, 3, redlock.WithLogger(logger), redlock.WithObserver(func(e redlock.Event) {
		emu.Lock()
		events = append(events, e)
		emu.Unlock()
	}))
	ctx := context.Background()
	l, err := c.Lock(ctx, "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.TryLock(ctx, "k", time.Second)
	_ = l.Extend(ctx, time.Second)
	_ = l.Release(ctx)
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	for _, want := range []string{"redlock: acquired", "redlock: not obtained", "redlock: extended", "redlock: released", "owner=" + l.Owner()[:8], "votes=", "elapsed="} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	emu.Lock()
	defer emu.Unlock()
	ops := []string{}
	for _, e := range events {
		ops = append(ops, fmt.Sprintf("%s:%v", e.Op, e.Err == nil))
		// The handle is there unless an acquisition failed; validity is
		// reported for every success (each ran well inside the 1s TTL).
		if (e.Lock == nil) != (e.Op == "acquire" && e.Err != nil) || (e.Lock != nil && e.Lock != l) {
			t.Errorf("%s event: Lock = %p, want %p", e.Op, e.Lock, l)
		}
		if e.Err == nil && (e.Remaining <= 0 || e.Remaining > time.Second) {
			t.Errorf("%s event: Remaining = %v", e.Op, e.Remaining)
		}
		if e.Attempts < 1 || len(e.Nodes) != 3 {
			t.Errorf("%s event: %d attempts, %d node results", e.Op, e.Attempts, len(e.Nodes))
		}
	}
	if got := strings.Join(ops, " "); got != "acquire:true acquire:false extend:true release:true" {
		t.Fatalf("events = %s", got)
	}
}

type syncWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func TestUserClientsStayOpen(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	var clients []redis.UniversalClient
	for _, n := range nodes {
		cl := n.Client()
		defer cl.Close()
		clients = append(clients, cl)
	}
	c, err := redlock.New(clients)
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.TryLock(context.Background(), "k", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(context.Background())
	c.Close()
	if err := clients[0].Ping(context.Background()).Err(); err != nil {
		t.Fatalf("Close closed the caller's client: %v", err)
	}
}

func TestMaxHold(t *testing.T) {
	c, _ := setup(t, 3, redlock.WithMaxHold(time.Second))
	ctx := context.Background()
	l, err := c.Lock(ctx, "k", 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if err := l.Extend(ctx, 500*time.Millisecond); err != nil {
		t.Fatalf("extend within the cap: %v", err)
	}
	before := l.Deadline()
	err = l.Extend(ctx, 2*time.Second)
	if !errors.Is(err, redlock.ErrNotExtended) || !strings.Contains(err.Error(), "max hold") {
		t.Fatalf("extend past the cap: %v", err)
	}
	if !l.Deadline().Equal(before) || l.Remaining() <= 0 {
		t.Fatal("refused extension changed the lock")
	}
}

// A Release right after TryLock returned at quorum, while one node's SET is
// still on its way, must reach that node after the SET (else the key would
// stay behind until its TTL), and with one release only: Release waits for
// the straggler's answer instead of sending a second clean-up after it.
func TestReleaseOrderedAfterStragglerSet(t *testing.T) {
	c, nodes, slow := behindProxy(t)
	ctx := context.Background()
	// Warm up: connections dialled and the release script cached on every
	// node, so the counted cycle below sends EVALSHA once per release.
	l, err := c.TryLock(ctx, "warm", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	direct := nodes[4].Client()
	defer direct.Close()
	if err := direct.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	slow.SetLatency(40 * time.Millisecond)
	l, err = c.TryLock(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Nodes()[4].Err; !errors.Is(got, redlock.ErrPending) {
		t.Fatalf("slow node's vote = %v, want it still pending when TryLock returned", got)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close() // waits for the slow node's SET and release
	vals, _ := raw(t, nodes, "k")
	if count(vals, "") != 5 {
		t.Fatalf("keys left after release: %v", vals)
	}
	releases := scriptCalls(t, nodes[4])
	if releases != 1 {
		t.Fatalf("slow node got %d release scripts, want exactly 1", releases)
	}
}

// A failed attempt on a key held elsewhere sends no release to the nodes
// that said no before the decision: nothing of ours was written there.
func TestFailedAttemptSkipsReleaseWhereRefused(t *testing.T) {
	c, nodes := setup(t, 5)
	ctx := context.Background()
	l, err := c.TryLock(ctx, "warm", 10*time.Second) // dial and cache the script everywhere
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close() // the warm-up's stragglers are done
	c = client(t, nodes)
	for _, n := range nodes {
		set(t, n, "k", "other", 10*time.Second)
		cl := n.Client()
		if err := cl.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		cl.Close()
	}
	_, err = c.TryLock(ctx, "k", 10*time.Second)
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) || qe.Got != 0 {
		t.Fatalf("err = %v", err)
	}
	answeredNo := 0
	for _, r := range qe.Nodes {
		if r.Err == nil && !r.Vote {
			answeredNo++
		}
	}
	c.Close()
	releases := 0
	for _, n := range nodes {
		releases += scriptCalls(t, n)
	}
	if answeredNo < 3 || releases > 5-answeredNo {
		t.Fatalf("%d nodes said no before the decision, %d releases sent; want at most %d", answeredNo, releases, 5-answeredNo)
	}
	vals, _ := raw(t, nodes, "k")
	if count(vals, "other") != 5 {
		t.Fatalf("the holder's keys were touched: %v", vals)
	}
}

// scriptCalls returns the EVAL and EVALSHA calls n served since its stats
// were last reset.
func scriptCalls(t *testing.T, n *harness.Node) int {
	t.Helper()
	cl := n.Client()
	defer cl.Close()
	stats, err := cl.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, line := range strings.Split(stats, "\n") {
		if strings.HasPrefix(line, "cmdstat_evalsha:") || strings.HasPrefix(line, "cmdstat_eval:") {
			var calls int
			fmt.Sscanf(line[strings.Index(line, "calls=")+len("calls="):], "%d", &calls)
			total += calls
		}
	}
	return total
}

// A frozen node gets one acquisition call at a time (a probe) instead of one
// per round: once a call to it has timed out, rounds started while a probe
// is in flight leave it out (ErrNodeSkipped) while the other four make the
// quorum and send it nothing (nor a release: nothing to undo), and it is
// used again as soon as a call comes back in time.
//
// The verdict rests on the order of events, never on how many rounds fit
// in a node timeout (that depends on the machine's speed). A hook on the
// frozen node's go-redis client sees every command sent there. It holds
// each probe (an acquisition sent after the first timeout) at a gate, for
// as long as the test needs to run rounds behind it, and counts the
// acquisitions in flight at once. The library takes the node's probe slot
// before the hook runs and gives it back after the hook returns, so with
// probing intact there is never more than one acquisition in flight there,
// however slow the machine, and a round that reports ErrNodeSkipped has
// sent nothing. Broken probing fails: if rounds kept sending to the
// suspect node, the rounds behind a held probe would pile up at the gate
// (two or more in flight) and none would report ErrNodeSkipped; if a
// skipped round still sent a release, the hook would see it; if the node
// were left out and never probed, no probe would come (the loop's generous
// deadline) and the thawed node would not be used again.
func TestTimedOutNodeIsProbedNotFlooded(t *testing.T) {
	const (
		nodeTimeout = 500 * time.Millisecond // generous: healthy nodes do not time out, even loaded
		probes      = 3                      // probes to hold, one after the other
		behind      = 5                      // rounds that report the node skipped, per held probe
	)
	nodes := harness.Start(t, 5, harness.Config{})
	frozen := nodes[4]
	// Warm up with another Client: the release script is then cached on
	// every node, so a release is one EVALSHA.
	warm := client(t, nodes)
	if l, err := warm.TryLock(context.Background(), "warm", 10*time.Second); err != nil {
		t.Fatal(err)
	} else if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	warm.Close() // its calls have all returned

	h := &probeHook{addr: frozen.Addr, sent: map[string][]string{}}
	var clients []redis.UniversalClient
	for i, n := range nodes {
		// What NewFromURLs makes: deadlines reach the socket, no retries
		// (so an acquisition is one SET NX).
		cl := redis.NewClient(&redis.Options{Addr: n.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
		if i == 4 {
			cl.AddHook(h)
		}
		clients = append(clients, cl)
	}
	c, err := redlock.New(clients, redlock.WithNodeTimeout(nodeTimeout), redlock.WithNodeObserver(h.observe))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		for _, cl := range clients {
			cl.Close()
		}
	})
	t.Cleanup(func() { h.hold(false) }) // runs first: a held probe must not hold up Close
	ctx := context.Background()
	lock := func(key string) redlock.NodeResult {
		t.Helper()
		l, err := c.TryLock(ctx, key, 10*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		r := l.Nodes()[4]
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release %s: %v", key, err)
		}
		return r
	}

	// The first call to the frozen node is sent like any other and times
	// out at the node deadline; probing starts from there.
	frozen.Freeze()
	defer frozen.Thaw()
	if r := lock("first"); errors.Is(r.Err, redlock.ErrNodeSkipped) {
		t.Fatalf("frozen node skipped before any call to it timed out: %+v", r)
	}
	waitUntil(t, "the first call to the frozen node to time out", func() bool { return h.timedOut() >= 1 })

	// Every round from here on starts after a timeout (keys "p..."). The
	// node's answer in Nodes() may be ErrPending even when the call is
	// skipped (the round was decided before that goroutine ran), so which
	// round became a probe is read from the hook, where it waits.
	h.hold(true)
	// The probes held, and the rounds that reported the node skipped.
	var held, skipped []string
	// A probe follows the previous one's timeout, at worst the end of a
	// release (TTL/4 = 2.5s here); the deadline is only reached if none is
	// sent.
	deadline := time.Now().Add(30 * time.Second)
	for round := 0; len(held) < probes; round++ {
		probe, ok := h.waiting()
		if !ok {
			if time.Now().After(deadline) {
				t.Fatalf("%d probes in 30s after the first timeout (%d rounds skipped the node): the suspect node is not probed", len(held), len(skipped))
			}
			key := fmt.Sprintf("p%d", round)
			if errors.Is(lock(key).Err, redlock.ErrNodeSkipped) {
				skipped = append(skipped, key)
				time.Sleep(time.Millisecond) // the slot is busy: no need to spin
			}
			continue
		}
		// A probe is in flight and held: rounds now must leave the node
		// out. However long they take, the probe stays in flight.
		held = append(held, probe)
		for j, n := 0, 0; n < behind; j++ {
			if j == 1000 {
				t.Fatalf("1000 rounds behind probe %s, %d reported the frozen node skipped", probe, n)
			}
			key := fmt.Sprintf("%s.%d", probe, j)
			if errors.Is(lock(key).Err, redlock.ErrNodeSkipped) {
				skipped = append(skipped, key)
				n++
			}
			if m := h.mostInFlight(); m > 1 {
				t.Fatalf("%d acquisitions in flight to the frozen node at once (round %s behind probe %s): a suspect node gets one probe at a time", m, key, probe)
			}
		}
		h.hold(false) // the probe goes on to its deadline (the node is frozen)
		want := 1 + len(held)
		waitUntil(t, "probe "+probe+" to time out", func() bool { return h.timedOut() >= want })
		h.hold(true)
	}
	h.hold(false)

	// Back in time: the first call that answers puts the node back.
	frozen.Thaw()
	backDeadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		if lock(fmt.Sprintf("back%d", i)).Vote {
			break
		}
		if time.Now().After(backDeadline) {
			t.Fatal("thawed node not used again within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.Close() // every call has returned: the hook's record is complete

	h.mu.Lock()
	defer h.mu.Unlock()
	if h.most > 1 {
		t.Errorf("%d acquisitions in flight to the frozen node at once after a timeout; a suspect node gets one probe at a time", h.most)
	}
	for _, k := range skipped {
		if len(h.sent[k]) != 0 {
			t.Errorf("round %s reported the frozen node skipped but sent it %v", k, h.sent[k])
		}
	}
	for _, k := range held {
		// One acquisition, and one release after its timeout (its outcome
		// is unknown: it may hold the key).
		if got := strings.Join(h.sent[k], " "); got != "set evalsha" {
			t.Errorf("probe %s sent %q to the frozen node, want one SET and then one release", k, got)
		}
	}
	for i, n := range nodes {
		cl := n.Client()
		keys, err := cl.Keys(ctx, "*").Result()
		cl.Close()
		if err != nil || len(keys) != 0 {
			t.Errorf("node %d: keys left after every lock was released: %v %v", i, keys, err)
		}
	}
	t.Logf("frozen node: %d probes held, %d rounds skipped it, %d acquisition timeouts, at most %d acquisition in flight",
		len(held), len(skipped), h.timeouts, h.most)
}

// probeHook is a go-redis hook on one node's client. It records the
// commands sent there per key, holds the acquisitions of probe-phase rounds
// (keys "p...") at a gate while holding is on, and counts how many of those
// are in flight at once. observe, the Client's node observer, counts the
// node's acquisition timeouts.
type probeHook struct {
	addr string

	mu       sync.Mutex
	sent     map[string][]string // key: commands sent for it, in order
	atGate   []string            // acquisitions waiting at the gate
	inflight int                 // probe-phase acquisitions in flight
	most     int                 // the most of them in flight at once
	timeouts int                 // acquisitions to the node that timed out
	gate     chan struct{}       // non-nil while holding
}

func (h *probeHook) observe(e redlock.NodeEvent) {
	if e.Op == "acquire" && e.Addr == h.addr && e.Timeout() {
		h.mu.Lock()
		h.timeouts++
		h.mu.Unlock()
	}
}

func (h *probeHook) timedOut() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.timeouts
}

func (h *probeHook) mostInFlight() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.most
}

// waiting returns an acquisition held at the gate.
func (h *probeHook) waiting() (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.atGate) == 0 {
		return "", false
	}
	return h.atGate[0], true
}

// hold makes probe-phase acquisitions wait at a gate (on), or lets every
// held one go on and stops holding (off).
func (h *probeHook) hold(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if on && h.gate == nil {
		h.gate = make(chan struct{})
	}
	if !on && h.gate != nil {
		close(h.gate)
		h.gate = nil
		h.atGate = nil
	}
}

func (h *probeHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *probeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *probeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		var key string
		switch cmd.Name() {
		case "set":
			key = fmt.Sprint(args[1])
		case "evalsha", "eval":
			key = fmt.Sprint(args[3])
		default:
			return next(ctx, cmd)
		}
		probe := cmd.Name() == "set" && strings.HasPrefix(key, "p")
		h.mu.Lock()
		h.sent[key] = append(h.sent[key], cmd.Name())
		gate := h.gate
		if probe {
			h.inflight++
			if h.inflight > h.most {
				h.most = h.inflight
			}
			if gate != nil {
				h.atGate = append(h.atGate, key)
			}
		}
		h.mu.Unlock()
		if !probe {
			return next(ctx, cmd)
		}
		defer func() {
			h.mu.Lock()
			h.inflight--
			h.mu.Unlock()
		}()
		if gate != nil {
			<-gate // held past its deadline, the call then fails at once with it
		}
		return next(ctx, cmd)
	}
}

// waitUntil polls cond until it holds. The deadline (30s) is far beyond
// what the awaited event takes; it is only reached if something is wrong.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// The caller's ctx ends while one node's SET is still on its way, and the
// clean-up sent after it travels on another connection that overtakes it
// (as a loaded proxy or network can do). The clean-up must reach that node
// after the SET, or the key stays behind until its TTL: every node's
// release is sent only once that node has answered the attempt's own
// command, and the command is not cut short by the caller's ctx (its
// answer would then be unknown).
func TestCleanupAfterCancelNotOvertakenBySet(t *testing.T) {
	for _, tc := range []struct {
		name string
		lock func(*redlock.Client, context.Context) error
	}{
		{"TryLock", func(c *redlock.Client, ctx context.Context) error {
			_, err := c.TryLock(ctx, "k", 10*time.Second)
			return err
		}},
		{"Lock", func(c *redlock.Client, ctx context.Context) error {
			_, err := c.Lock(ctx, "k", 10*time.Second)
			return err
		}},
		{"LockKeys", func(c *redlock.Client, ctx context.Context) error {
			_, err := c.LockKeys(ctx, []string{"k", "k2"}, 10*time.Second)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, nodes, p := behindProxy(t)
			warm, err := c.TryLock(context.Background(), "warm", 10*time.Second) // dial every node
			if err != nil {
				t.Fatal(err)
			}
			if err := warm.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // the warm-up's release to node 4 is through the proxy
			// Two nodes say no, two yes: the round waits for node 4, whose
			// SET is held 300ms in the proxy; the ctx ends after 50ms.
			for _, n := range nodes[:2] {
				set(t, n, "k", "other", 10*time.Second)
			}
			p.DelayNext(300 * time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			start := time.Now()
			err = tc.lock(c, ctx)
			if !errors.Is(err, redlock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v", err)
			}
			if d := time.Since(start); d > 200*time.Millisecond {
				t.Fatalf("returned after %v: the caller must not wait for the held SET", d)
			}
			c.Close()                                                 // waits for node 4's SET and the clean-up after it
			time.Sleep(time.Until(start.Add(400 * time.Millisecond))) // the held SET has landed by now
			for _, key := range []string{"k", "k2"} {
				vals, _ := raw(t, nodes, key)
				for i, v := range vals {
					if v != "" && v != "other" {
						t.Fatalf("%s left on node %d: %q (all: %q)", key, i, v, vals)
					}
				}
			}
		})
	}
}

// behindProxy starts 5 nodes and a Client (node timeout 1s) that reaches
// node 4 through a fault proxy.
func behindProxy(t *testing.T) (*redlock.Client, []*harness.Node, *harness.Proxy) {
	t.Helper()
	nodes := harness.Start(t, 5, harness.Config{})
	p, err := harness.NewProxy(func() string { return nodes[4].Addr })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	urls := harness.URLs(nodes)
	urls[4] = p.URL()
	c, err := redlock.NewFromURLs(urls, redlock.WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, nodes, p
}

// go-redis sends a command again after an EOF (MaxRetries, default 3). A
// SET NX that ran, lost its reply and was sent again finds our own key and
// says no: the lock would count the node as refused and leave the key
// behind. Clients that may retry therefore get the lock script, which says
// yes where our value already is; NewFromURLs turns retries off.
func TestRetriedSetCountsAsOurs(t *testing.T) {
	for _, viaURL := range []bool{false, true} {
		t.Run(fmt.Sprintf("NewFromURLs=%v", viaURL), func(t *testing.T) {
			nodes := harness.Start(t, 3, harness.Config{})
			p, err := harness.NewProxy(func() string { return nodes[2].Addr })
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			var mu sync.Mutex
			var answers []redlock.NodeEvent // node 2's acquisition answers
			opts := []redlock.Option{redlock.WithNodeTimeout(time.Second), redlock.WithNodeObserver(func(e redlock.NodeEvent) {
				if e.Op == "acquire" && e.Addr == p.Addr {
					mu.Lock()
					answers = append(answers, e)
					mu.Unlock()
				}
			})}
			var c *redlock.Client
			if viaURL {
				urls := harness.URLs(nodes)
				urls[2] = p.URL()
				c, err = redlock.NewFromURLs(urls, opts...)
			} else {
				var clients []redis.UniversalClient
				for _, a := range []string{nodes[0].Addr, nodes[1].Addr, p.Addr} {
					cl := redis.NewClient(&redis.Options{Addr: a, ContextTimeoutEnabled: true}) // MaxRetries: default 3
					t.Cleanup(func() { cl.Close() })
					clients = append(clients, cl)
				}
				c, err = redlock.New(clients, opts...)
			}
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			warm, err := c.TryLock(ctx, "warm", 10*time.Second) // dial every node
			if err != nil {
				t.Fatal(err)
			}
			if err := warm.Release(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // the warm-up's release to node 2 is answered too
			p.CutNextReply()
			l, err := c.TryLock(ctx, "k", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			c.Close() // node 2's answer and release are in
			mu.Lock()
			got := answers[len(answers)-1]
			mu.Unlock()
			if viaURL {
				if got.Err == nil { // no retry: the outcome is unknown, and counted so
					t.Fatalf("node 2 answered %+v, want the EOF", got.NodeResult)
				}
			} else if !got.Vote {
				t.Fatalf("node 2 answered %+v: the retried SET was counted as a refusal", got.NodeResult)
			}
			vals, _ := raw(t, nodes, "k")
			if count(vals, "") != 3 {
				t.Fatalf("keys left after release: %q", vals)
			}
		})
	}
}
