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
	"github.com/redlock-go/redlock/admin"
	"github.com/redlock-go/redlock/clock"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/observe"
)

func TestLockUnlock(t *testing.T) {
	for _, n := range []int{1, 3, 5} {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) {
			c, nodes := setup(t, n)
			ctx := context.Background()
			const ttl = 5 * time.Second
			before := time.Now()
			l, err := c.Lock(ctx, "res", ttl)
			if err != nil {
				t.Fatal(err)
			}
			// The validity counts from the attempt's start, which lies
			// between before and now: at most TTL minus the drift budget,
			// at least that minus the time taken since before.
			r := l.Remaining()
			most := ttl - admin.DriftBudget(ttl, admin.DefaultDriftFactor)
			if least := most - time.Since(before); r <= 0 || r > most || r < least {
				t.Fatalf("Remaining = %v, want within [%v, %v]", r, least, most)
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
			// Release returned at quorum; the other nodes' releases may
			// still be on their way. Any key left would stay past the
			// lock's deadline (its TTL counts from later on the node).
			if vals, _ := rawUntil(t, nodes, "res", l.Deadline(), func(vals []string, _ []time.Duration) bool {
				return count(vals, "") == n
			}); count(vals, "") != n {
				t.Fatalf("keys left after release: %v", vals)
			}
			l2, err := c.TryLock(ctx, "res", 10*time.Second)
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

// Many goroutines, several clients, one key: never two holders at once,
// and the lock keeps being handed on (target acquisitions, however long
// they take; the deadline is only reached if the lock stops changing
// hands).
func TestContentionNoOverlap(t *testing.T) {
	const target = 300
	nodes := harness.Start(t, 5, harness.Config{})
	clients := []*redlock.Client{client(t, nodes), client(t, nodes), client(t, nodes)}
	var holders, maxHolders, acquired atomic.Int32
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
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
				if acquired.Add(1) >= target {
					cancel()
				}
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
	if acquired.Load() < target {
		t.Fatalf("only %d acquisitions in 60s, want %d", acquired.Load(), target)
	}
	if vals, _ := raw(t, nodes, "hot"); count(vals, "") != len(nodes) {
		t.Fatalf("leftover keys: %v", vals)
	}
	t.Logf("%d acquisitions", acquired.Load())
}

// A frozen node must not slow acquisition down to the node timeout: the
// call returns at quorum. Checked on what each call reports, not on how
// long it took: every TryLock and Release returns with the frozen node's
// answer still outstanding (ErrPending) or not asked for (skipped, not
// sent), never with its timeout, which a call that waited for it would
// show.
func TestFrozenNodeDoesNotSlowAcquire(t *testing.T) {
	for _, honors := range []bool{true, false} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", honors), func(t *testing.T) {
			nodes := harness.Start(t, 5, harness.Config{})
			var clients []redis.UniversalClient
			rt := 3 * time.Second
			if honors {
				rt = 20 * time.Second // the node deadline, not this, must end the calls
			}
			for _, n := range nodes {
				cl := redis.NewClient(&redis.Options{Addr: n.Addr, ContextTimeoutEnabled: honors, ReadTimeout: rt})
				clients = append(clients, cl)
			}
			var mu sync.Mutex
			var releases []observe.NodeResult // the frozen node in each Release
			var slowest time.Duration         // of the frozen node's calls, start of round to end
			c, err := redlock.New(clients, redlock.WithNodeTimeout(time.Second),
				redlock.WithObserver(func(e observe.Event) {
					if e.Op == "release" && len(e.Nodes) == 5 {
						mu.Lock()
						releases = append(releases, e.Nodes[2])
						mu.Unlock()
					}
				}),
				redlock.WithNodeObserver(func(e observe.NodeEvent) {
					if e.Addr == nodes[2].Addr {
						mu.Lock()
						slowest = max(slowest, e.Latency)
						mu.Unlock()
					}
				}))
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
				if r := l.Votes()[2]; !errors.Is(r.Err, observe.ErrPending) && !errors.Is(r.Err, observe.ErrNodeSkipped) {
					t.Fatalf("round %d: TryLock returned with the frozen node's answer %+v: it waited for it", i, r)
				}
				if err := l.Release(context.Background()); err != nil {
					t.Fatal(err)
				}
				worst = max(worst, time.Since(start))
			}
			mu.Lock()
			for i, r := range releases {
				// Outstanding, or not sent where the acquisition skipped
				// the node; a Release that waited would show the timeout.
				if r.Err == nil || r.Timeout() {
					t.Errorf("release %d returned with the frozen node's answer %+v: it waited for it", i, r)
				}
			}
			if len(releases) != 20 {
				t.Errorf("%d release events, want 20", len(releases))
			}
			mu.Unlock()
			// Close waits for the stragglers: each frozen-node call ends at
			// the 1s node deadline, and the release there (and the late
			// clean-up) at the release deadline, min(10 x 1s, TTL/4) =
			// 7.5s. With ContextTimeoutEnabled these deadlines reach the
			// socket, well before the 20s ReadTimeout: a call that ran to
			// the ReadTimeout instead would take 20s from its round's
			// start, however fast the machine.
			closeStart := time.Now()
			c.Close()
			closed := time.Since(closeStart)
			mu.Lock()
			if honors && slowest >= rt {
				t.Errorf("a call to the frozen node took %v from its round's start: it ran to the %v ReadTimeout, past its deadline", slowest, rt)
			}
			mu.Unlock()
			nodes[2].Thaw()
			for _, cl := range clients {
				cl.Close()
			}
			t.Logf("worst acquire+release with one of five frozen: %v; Close took %v; slowest frozen-node call %v", worst, closed, slowest)
		})
	}
}

func TestDeadMinorityTolerated(t *testing.T) {
	c, nodes := setup(t, 5)
	nodes[0].Kill()
	nodes[4].Kill()
	l, err := c.TryLock(context.Background(), "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	res := l.Votes()
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
		if n.Err != nil && !errors.Is(n.Err, observe.ErrPending) {
			failed++
			// Fast: the dead nodes refused at once, and the round was
			// decided on those refusals; a call that waited for the 1s
			// node deadline would report its timeout.
			if n.Timeout() {
				t.Errorf("node %s: %v; a dead node refuses, the round must not wait for its deadline", n.Addr, n.Err)
			}
		}
	}
	if failed < 2 || qe.Got > 2 {
		t.Fatalf("per-node detail does not show the dead nodes: %v", err)
	}
	t.Logf("failed in %v with three of five nodes dead", elapsed)
	// Lock keeps retrying and ends with ctx's error.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = c.Lock(ctx, "k", 10*time.Second)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("Lock with dead majority: %v", err)
	}
	c.Close() // the last attempt's calls and their clean-up run on after Lock returned
	if vals, _ := raw(t, nodes[3:], "k"); count(vals, "") != 2 {
		t.Fatalf("failed attempts left keys on the live nodes: %v", vals)
	}
}

// The ctx is cancelled once the Lock has been refused more often than one
// attempt can be (each node says no once per attempt): so it has retried,
// however long each attempt took.
func TestCancelledLockReturnsCtxError(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var refusals atomic.Int32
	c, _ := setup(t, 3, redlock.WithNodeObserver(func(e observe.NodeEvent) {
		if e.Op == "acquire" && e.Err == nil && !e.Vote && refusals.Add(1) > 3 {
			cancel()
		}
	}))
	holder, err := c.Lock(context.Background(), "k", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release(context.Background())
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
	ev := &nodeEventLog{}
	c, nodes := setup(t, 3, redlock.WithNodeTimeout(time.Second), redlock.WithNodeObserver(ev.observe))
	ctx := context.Background()
	const ttl, longer = 5 * time.Second, 30 * time.Second
	l, err := c.Lock(ctx, "k", ttl)
	if err != nil {
		t.Fatal(err)
	}
	holders := holding(t, ev, nodes, "k", l.Owner())
	if len(holders) < c.Quorum() {
		t.Fatalf("lock held on %d nodes, quorum %d", len(holders), c.Quorum())
	}
	before := l.Deadline()
	start := time.Now()
	if err := l.Extend(ctx, longer); err != nil {
		t.Fatal(err)
	}
	// The new validity counts from the extension's start, between start
	// and now.
	r := l.Remaining()
	most := longer - admin.DriftBudget(longer, admin.DefaultDriftFactor)
	if least := most - time.Since(start); !l.Deadline().After(before) || r > most || r < least {
		t.Fatalf("deadline not moved: %v -> %v (%v left, want within [%v, %v])", before, l.Deadline(), r, least, most)
	}
	// Every node that held the lock takes the new TTL (Extend returned at
	// quorum, the last node's call may still be on its way): a PTTL above
	// the first TTL can only come from the extension, and stays so for
	// 25s.
	extended := func(_ []string, ttls []time.Duration) bool {
		for i, d := range ttls {
			if holders[i] && (d <= ttl || d > longer) {
				return false
			}
		}
		return true
	}
	if _, ttls := rawUntil(t, nodes, "k", time.Now().Add(10*time.Second), extended); !extended(nil, ttls) {
		t.Fatalf("PTTL %v after extending a %v lock to %v (held on %v)", ttls, ttl, longer, holders)
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
	// 500 ms, not less: the TTL caps the node deadline at a tenth of it,
	// and a call that misses it on a loaded machine leaves its node
	// skipped in the next round (the stolen lock's, below).
	a, err := c.Lock(ctx, "k", 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond)
	if err := a.Extend(ctx, 30*time.Second); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("extend of expired lock: %v", err)
	}
	// The 500ms keys expire (a node that took its SET late holds it a
	// little longer); a key re-created by the extension would stay 30s.
	if vals, _ := rawUntil(t, nodes, "k", time.Now().Add(10*time.Second), func(vals []string, _ []time.Duration) bool {
		return count(vals, "") == 5
	}); count(vals, "") != 5 {
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
	nodes := harness.Start(t, 5, harness.Config{})
	ev := &nodeEventLog{} // B's Client's
	ca := client(t, nodes)
	c := client(t, nodes, redlock.WithNodeTimeout(time.Second), redlock.WithNodeObserver(ev.observe))
	ctx := context.Background()
	a, err := ca.Lock(ctx, "k", 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	// A's keys are gone on every node (one that took its SET late holds
	// it a little longer), so B gets every node.
	if vals, _ := rawUntil(t, nodes, "k", time.Now().Add(10*time.Second), func(vals []string, _ []time.Duration) bool {
		return count(vals, "") == 5
	}); count(vals, "") != 5 {
		t.Fatalf("A's 100ms lock still on the nodes: %v", vals)
	}
	b, err := c.TryLock(ctx, "k", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	holders := holding(t, ev, nodes, "k", b.Owner())
	if len(holders) < c.Quorum() {
		t.Fatalf("B holds %d nodes, quorum %d", len(holders), c.Quorum())
	}
	err = a.Release(ctx)
	var qe *redlock.QuorumError
	if !errors.Is(err, redlock.ErrNotHeld) || !errors.As(err, &qe) || len(qe.Nodes) != 5 {
		t.Fatalf("stale release: %v", err)
	}
	ca.Close() // every release call of A's has returned
	vals, _ := raw(t, nodes, "k")
	for i, v := range vals {
		if holders[i] && v != b.Owner() {
			t.Fatalf("B's lock disturbed by A's release on node %d: %q (B held %v)", i, vals, holders)
		}
	}
	if err := b.Extend(ctx, 30*time.Second); err != nil {
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
	c.Close() // nodes that answered after the decision are undone then
	vals, _ := raw(t, nodes, "k")
	if count(vals, "other") != 3 || count(vals, "") != 2 {
		t.Fatalf("failed attempt left keys: %v", vals)
	}
}

// A pause during acquisition (here: the client's clock jumps past the TTL
// while the round runs) makes the attempt fail and clean up every node.
func TestPauseDuringAcquisitionFails(t *testing.T) {
	jc := &jumpClock{Clock: clock.Real()}
	// Without the restart quarantine: a client clock 20 s further on at
	// every reading makes every node look started after the Client.
	c, nodes := setup(t, 5, redlock.WithClock(jc), redlock.WithRestartQuarantine(redlock.QuarantineOff))
	jc.jump.Store(int64(20 * time.Second)) // every reading lands 20s later
	_, err := c.TryLock(context.Background(), "k", 10*time.Second)
	var qe *redlock.QuorumError
	if !errors.Is(err, redlock.ErrNotObtained) || !errors.As(err, &qe) || qe.Got < qe.Need || qe.Validity > 0 {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "validity ran out") {
		t.Fatalf("message does not say why: %v", err)
	}
	c.Close() // nodes that answered after the decision are undone then
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
	c.Close() // a node that answered after the decision is undone then
	if vals, _ := raw(t, nodes, "acct:A"); count(vals, "") != 3 {
		t.Fatalf("partial multi-lock left behind: %v", vals)
	}
}

func TestQuorumModes(t *testing.T) {
	nodes := harness.Start(t, 5, harness.Config{})
	all := client(t, nodes, redlock.WithQuorum(redlock.AllNodes))
	four := client(t, nodes, redlock.WithQuorum(4))
	ctx := context.Background()
	l, err := all.TryLock(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(ctx)
	nodes[4].Kill()
	if _, err := all.TryLock(ctx, "k", time.Second); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("AllNodes with a dead node: %v", err)
	}
	// The failed attempt returned as soon as the dead node made the quorum
	// impossible; its clean-up of nodes that answered later goes on in the
	// background. Another Client may find it still there; Close waits for it.
	all.Close()
	l, err = four.TryLock(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatalf("WithQuorum(4) with 4 alive: %v", err)
	}
	_ = l.Release(ctx)
	nodes[3].Kill()
	if _, err := four.TryLock(ctx, "k", time.Second); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("WithQuorum(4) with 3 alive: %v", err)
	}
}

// Scripts are cached with EVALSHA; after SCRIPT FLUSH (or a restart) the
// NOSCRIPT fallback loads them again.
func TestNoScriptFallback(t *testing.T) {
	c, nodes := setup(t, 3)
	ctx := context.Background()
	// A TTL long enough that the lock is still valid for the Extend
	// however long the flushes take.
	l, err := c.Lock(ctx, "k", 30*time.Second)
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
	if err := l.Extend(ctx, 30*time.Second); err != nil {
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
	var events []observe.Event
	var emu sync.Mutex
	c, _ := setup(t, 3, redlock.WithLogger(logger), redlock.WithObserver(func(e observe.Event) {
		emu.Lock()
		events = append(events, e)
		emu.Unlock()
	}))
	ctx := context.Background()
	// TTLs long enough that the lock stays valid to the Release however
	// slow the machine: every event below reports validity left.
	const ttl = 30 * time.Second
	l, err := c.Lock(ctx, "k", ttl)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.TryLock(ctx, "k", ttl)
	_ = l.Extend(ctx, ttl)
	_ = l.Release(ctx)
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	for _, want := range []string{"redlock: acquired", "redlock: not obtained", "redlock: extended", "redlock: released", "owner=" + attemptID(l.Owner())[:8], "client=" + c.ID(), "votes=", "elapsed="} {
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
		// reported for every success.
		if (e.Lock == nil) != (e.Op == "acquire" && e.Err != nil) || (e.Lock != nil && e.Lock != l) {
			t.Errorf("%s event: Lock = %p, want %p", e.Op, e.Lock, l)
		}
		if e.Err == nil && (e.Remaining <= 0 || e.Remaining > ttl) {
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
	l, err := c.TryLock(context.Background(), "k", 10*time.Second)
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
	// Durations long enough that the first extension is within the cap
	// and the lock still valid at the end however slow the machine (the
	// second extension is past the cap from the start).
	c, _ := setup(t, 3, redlock.WithMaxHold(20*time.Second))
	ctx := context.Background()
	l, err := c.Lock(ctx, "k", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if err := l.Extend(ctx, 5*time.Second); err != nil {
		t.Fatalf("extend within the cap: %v", err)
	}
	before := l.Deadline()
	err = l.Extend(ctx, 30*time.Second)
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
	ev := &nodeEventLog{}
	c, nodes, slow := behindProxy(t, redlock.WithNodeObserver(ev.observe))
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
	// The warm-up's release to node 4 has been answered: it cannot be
	// counted below.
	waitUntil(t, "node 4's answer to the warm-up's release", func() bool { return len(ev.of("release", slow.Addr)) == 1 })
	direct := nodes[4].Client()
	defer direct.Close()
	if err := direct.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	// 200ms each way: node 4 answers long after the four direct nodes
	// made the quorum, still well inside the 1s node timeout.
	slow.SetLatency(200 * time.Millisecond)
	l, err = c.TryLock(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Votes()[4].Err; !errors.Is(got, observe.ErrPending) {
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
	releases := releaseCalls(t, nodes[4])
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
	// This Client publishes its TTL to the nodes' registers (a script)
	// before its first grant: warm it up too, until its release reached
	// every node, so that only the attempt's own calls are counted.
	if l, err = c.TryLock(ctx, "warm2", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	rawUntil(t, nodes, "warm2", time.Now().Add(5*time.Second), func(vals []string, _ []time.Duration) bool { return count(vals, "") == 5 })
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
		releases += releaseCalls(t, n)
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
	c := commandCalls(t, n)
	return c["evalsha"] + c["eval"]
}

// releaseCalls is scriptCalls less the guarded grant scripts, each of which
// runs INFO twice (its process guard: INFO server, INFO stats).
// Identification (INFO outside a script) must be over before the stats
// were reset.
func releaseCalls(t *testing.T, n *harness.Node) int {
	t.Helper()
	c := commandCalls(t, n)
	return c["evalsha"] + c["eval"] - c["info"]/2
}

// commandCalls returns how often n ran each command (also inside scripts)
// since its stats were last reset, as one INFO commandstats read (which
// does not count itself).
func commandCalls(t *testing.T, n *harness.Node) map[string]int {
	t.Helper()
	cl := n.Client()
	defer cl.Close()
	stats, err := cl.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int{}
	for _, line := range strings.Split(stats, "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if ok && strings.HasPrefix(line, "cmdstat_") {
			var k int
			fmt.Sscanf(rest, "%d", &k)
			calls[name] = k
		}
	}
	return calls
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
	warmScripts(t, nodes)
	h := &probeHook{addr: frozen.Addr, sent: map[string][]string{}}
	clients := hookedClients(nodes, 4, h)
	// Without coalescing: a probe then occupies the caller until the hook
	// lets it go, which is how the test holds it. (A coalescing node keeps
	// one call or pipeline in flight by construction and its callers leave
	// at their deadlines: TestFrozenNodeCoalescedOneBatchAtATime.)
	// Quarantine off: it would send the frozen node its identity and TTL
	// register besides the rounds' commands (a register entry is published
	// again some seconds on, and that call, not a lock command, would be
	// the probe the hook waits for).
	c, err := redlock.New(clients, redlock.WithNodeTimeout(nodeTimeout), redlock.WithNodeObserver(h.observe),
		redlock.WithoutCoalescing(), redlock.WithRestartQuarantine(redlock.QuarantineOff))
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
	lock := func(key string) observe.NodeResult {
		t.Helper()
		l, err := c.TryLock(ctx, key, 10*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		r := l.Votes()[4]
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release %s: %v", key, err)
		}
		return r
	}

	// One lock before the freeze: every node is dialed and has the
	// scripts, so that what goes to the frozen node from here on is the
	// rounds' own commands.
	lock("warm")
	// Release returns at quorum: freeze node 4 only once the warm-up's
	// release has reached it, or a loaded machine leaves "warm" there.
	waitUntil(t, "the warm-up's release on node 4", func() bool {
		keys, err := lockKeys(ctx, frozen)
		return err == nil && len(keys) == 0
	})
	// The first call to the frozen node is sent like any other and times
	// out at the node deadline; probing starts from there.
	frozen.Freeze()
	defer frozen.Thaw()
	if r := lock("first"); errors.Is(r.Err, observe.ErrNodeSkipped) {
		t.Fatalf("frozen node skipped before any call to it timed out: %+v", r)
	}
	waitUntil(t, "the first call to the frozen node to time out", func() bool { return h.timedOut() >= 1 })

	// Every round from here on starts after a timeout (keys "p..."). The
	// node's answer in Votes() may be ErrPending even when the call is
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
			if errors.Is(lock(key).Err, observe.ErrNodeSkipped) {
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
			if errors.Is(lock(key).Err, observe.ErrNodeSkipped) {
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
		keys, err := lockKeys(ctx, n)
		if i == 4 && len(keys) == 1 && keys[0] == "first" {
			// The first SET sat in the frozen node's socket past its
			// timeout, and its release on another connection may be read
			// first after the thaw: the unknown-outcome case docs/usage.md
			// states (a minority key that expires with its TTL).
			continue
		}
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

func (h *probeHook) observe(e observe.NodeEvent) {
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
			ev := &nodeEventLog{}
			c, nodes, p := behindProxy(t, redlock.WithNodeObserver(ev.observe))
			warm, err := c.TryLock(context.Background(), "warm", 10*time.Second) // dial every node
			if err != nil {
				t.Fatal(err)
			}
			if err := warm.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
			// The warm-up's release to node 4 is through the proxy (else
			// the delay below would hold it instead of the SET).
			waitUntil(t, "node 4's answer to the warm-up's release", func() bool { return len(ev.of("release", p.Addr)) == 1 })
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
			elapsed := time.Since(start)
			if !errors.Is(err, redlock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v", err)
			}
			// The caller did not wait for the held SET: node 4 had not
			// answered when the call returned.
			var qe *redlock.QuorumError
			if !errors.As(err, &qe) || len(qe.Nodes) != 5 || !errors.Is(qe.Nodes[4].Err, observe.ErrPending) {
				t.Fatalf("returned after %v with %v: the caller must not wait for the held SET", elapsed, err)
			}
			c.Close() // waits for node 4's SET and the clean-up after it
			// Node 4 answered the SET (so it has landed) before its
			// deadline; the clean-up was sent after that answer.
			if got := ev.of("acquire", p.Addr); len(got) != 2 || got[1].Err != nil {
				t.Fatalf("node 4's acquisition answers %+v: want the warm-up's and this attempt's, without error", got)
			}
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

// behindProxy starts 5 nodes and a Client (node timeout 1s, and opts) that
// reaches node 4 through a fault proxy.
func behindProxy(t *testing.T, opts ...redlock.Option) (*redlock.Client, []*harness.Node, *harness.Proxy) {
	t.Helper()
	nodes := harness.Start(t, 5, harness.Config{})
	p, err := harness.NewProxy(func() string { return nodes[4].Addr })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	urls := harness.URLs(nodes)
	urls[4] = p.URL()
	c, err := harness.NewClient(t, urls, append([]redlock.Option{redlock.WithNodeTimeout(time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, nodes, p
}

// nodeEventLog records a Client's node events (WithNodeObserver).
type nodeEventLog struct {
	mu   sync.Mutex
	list []observe.NodeEvent
}

func (l *nodeEventLog) observe(e observe.NodeEvent) {
	l.mu.Lock()
	l.list = append(l.list, e)
	l.mu.Unlock()
}

// holding waits until every node has answered an acquisition of the
// Client that ev observes (its Lock returned at quorum; the other SETs may
// still be on their way), then reports which nodes hold key under owner.
func holding(t *testing.T, ev *nodeEventLog, nodes []*harness.Node, key, owner string) map[int]bool {
	t.Helper()
	waitUntil(t, "every node's answer to the acquisition", func() bool {
		for _, n := range nodes {
			if len(ev.of("acquire", n.Addr)) == 0 {
				return false
			}
		}
		return true
	})
	vals, _ := raw(t, nodes, key)
	held := map[int]bool{}
	for i, v := range vals {
		if v == owner {
			held[i] = true
		}
	}
	return held
}

// of returns the events of op calls to addr, in the order they ended.
func (l *nodeEventLog) of(op observe.Op, addr string) []observe.NodeEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []observe.NodeEvent
	for _, e := range l.list {
		if e.Op == op && e.Addr == addr {
			out = append(out, e)
		}
	}
	return out
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
			ev := &nodeEventLog{}
			opts := []redlock.Option{redlock.WithNodeTimeout(time.Second), redlock.WithNodeObserver(ev.observe)}
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
			// The warm-up's release to node 2 is answered too: the cut
			// below meets the next reply, the SET's.
			waitUntil(t, "node 2's answer to the warm-up's release", func() bool { return len(ev.of("release", p.Addr)) == 1 })
			p.CutNextReply()
			l, err := c.TryLock(ctx, "k", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
			c.Close() // node 2's answer and release are in
			answers := ev.of("acquire", p.Addr)
			got := answers[len(answers)-1]
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

// attemptID is the random part of an owner value, which logs shorten.
func attemptID(owner string) string {
	_, a := admin.SplitOwner(owner)
	return a
}

// A key held by someone else is a normal outcome: a logger at Warn gets no
// line for TryLock calls refused by the holder, and a Client without
// WithLogger writes none of them to slog.Default either.
func TestRefusedTryLockIsNoWarning(t *testing.T) {
	var buf, def bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&syncWriter{w: &buf, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&syncWriter{w: &def, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(prev) })
	nodes := harness.Start(t, 3, harness.Config{})
	logged, silent := client(t, nodes, redlock.WithLogger(logger)), client(t, nodes)
	ctx := context.Background()
	l, err := logged.Lock(ctx, "held", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	for range 20 {
		for _, c := range []*redlock.Client{logged, silent} {
			if _, err := c.TryLock(ctx, "held", time.Second); !errors.Is(err, redlock.ErrNotObtained) {
				t.Fatalf("TryLock of a held key: %v, want ErrNotObtained", err)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if buf.Len() > 0 {
		t.Errorf("the Client's logger at Warn got lines for refused TryLocks:\n%s", buf.String())
	}
	if def.Len() > 0 {
		t.Errorf("slog.Default got lines from a Client without a logger:\n%s", def.String())
	}
}
