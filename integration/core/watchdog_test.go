package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/observe"
)

// events records a Client's events of one op, in order, and lets a test
// wait for the n-th without sleeping.
type events struct {
	mu   sync.Mutex
	list []observe.Event
	more chan struct{}
}

func newEvents() *events { return &events{more: make(chan struct{}, 1024)} }

func (e *events) observe(ev observe.Event) {
	e.mu.Lock()
	e.list = append(e.list, ev)
	e.mu.Unlock()
	select {
	case e.more <- struct{}{}:
	default:
	}
}

// waitFor blocks until match has held for n events (or fails the test
// after a long hang guard).
func (e *events) waitFor(t *testing.T, n int, match func(observe.Event) bool) []observe.Event {
	t.Helper()
	guard := time.After(time.Minute)
	for {
		e.mu.Lock()
		var got []observe.Event
		for _, ev := range e.list {
			if match(ev) {
				got = append(got, ev)
			}
		}
		e.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-e.more:
		case <-guard:
			t.Fatalf("only %d of %d events after a minute", len(got), n)
		}
	}
}

func renewedOK(e observe.Event) bool { return e.Op == "renew" && e.Err == nil }

// The watchdog keeps a lock alive well past its lease while the work
// runs: the nodes' PTTL is renewed, and the lock is released at the end.
func TestWatchdogKeepsLockPastLease(t *testing.T) {
	ev := newEvents()
	const lease = 600 * time.Millisecond
	// A node timeout that a loaded machine does not reach, so that every
	// node takes every renewal.
	c, nodes := setup(t, 3, redlock.WithWatchdog(lease, lease/3), redlock.WithNodeTimeout(time.Second), redlock.WithObserver(ev.observe))
	var owner string
	err := c.Run(context.Background(), "job", func(ctx context.Context) error {
		began := time.Now()
		renewals := ev.waitFor(t, 4, renewedOK)
		if held := time.Since(began); held <= lease {
			t.Errorf("4 renewals within %v, a lease of %v", held, lease)
		}
		l := renewals[len(renewals)-1].Lock
		owner = l.Owner()
		// Every node that holds our value holds it with a TTL the renewals
		// set (the key would be gone after one lease without them), and a
		// quorum holds it.
		vals, ttls := raw(t, nodes, "job")
		for i := range vals {
			if vals[i] == owner && (ttls[i] <= 0 || ttls[i] > lease) {
				t.Errorf("node %d: PTTL %v after renewals", i, ttls[i])
			}
		}
		if count(vals, owner) < c.Quorum() {
			t.Errorf("nodes hold %q; want our value on a quorum", vals)
		}
		return ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if vals, _ := raw(t, nodes, "job"); count(vals, "") != 3 {
		t.Fatalf("key left after Run: %q", vals)
	}
}

// Nodes that restart empty under a held lock: the next renewal finds that
// a quorum no longer holds it and the lost signal fires at once, long
// before the validity deadline, with the renewal's per-node answers.
func TestLostSignalFromRenewal(t *testing.T) {
	ev := newEvents()
	c, nodes := setup(t, 3, redlock.WithWatchdog(time.Minute, 100*time.Millisecond), redlock.WithObserver(ev.observe))
	l, err := c.Lock(context.Background(), "k", redlock.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	ev.waitFor(t, 1, renewedOK)
	for _, n := range nodes[:2] {
		if err := n.Restart(); err != nil { // no persistence: the lock is forgotten
			t.Fatal(err)
		}
	}
	<-l.Done()
	cause := context.Cause(l.Context())
	var qe *redlock.QuorumError
	if !errors.Is(cause, redlock.ErrLockLost) || !errors.As(cause, &qe) || qe.Op != "renew" || len(qe.Nodes) != 3 {
		ev.mu.Lock()
		seen := map[string]int{}
		for _, e := range ev.list {
			if e.Err != nil {
				var q *redlock.QuorumError
				if errors.As(e.Err, &q) {
					for _, n := range q.Nodes {
						seen[fmt.Sprintf("%s vote=%v err=%v", n.Addr, n.Vote, n.Err)]++
					}
				}
			}
		}
		ev.mu.Unlock()
		t.Logf("the node answers of the failed renewals (answer: count): %v", seen)
		t.Fatalf("cause = %v; want ErrLockLost from a renewal, with every node's answer", cause)
	}
	if !errors.Is(l.Err(), redlock.ErrLockLost) || l.Remaining() != 0 {
		t.Fatalf("after the loss: Err %v, Remaining %v", l.Err(), l.Remaining())
	}
	lost := ev.waitFor(t, 1, func(e observe.Event) bool { return e.Op == "lost" })
	if !errors.Is(lost[0].Err, redlock.ErrLockLost) || lost[0].Lock != l {
		t.Fatalf("lost event: %+v", lost[0])
	}
	// Release still cleans up what is left (node 2), and reports that no
	// quorum held it.
	if err := l.Release(context.Background()); !errors.Is(err, redlock.ErrNotHeld) {
		t.Fatalf("Release of a lost lock = %v", err)
	}
	c.Close()
	if vals, _ := raw(t, nodes, "k"); count(vals, "") != 3 {
		t.Fatalf("key left: %q", vals)
	}
}

// A frozen majority: renewals time out and are retried within the
// validity; none succeeds, so the timer set for the deadline fires the
// signal. It never fires early: when Done is closed, the deadline has
// passed on the monotonic clock.
func TestLostSignalAtDeadline(t *testing.T) {
	ev := newEvents()
	// After the freeze at least two renewal intervals of validity are left
	// (3 s lease, renewed every 500 ms), and each failed try takes a node
	// timeout (50 ms) plus a retry wait of 50 ms or less: room for a dozen
	// tries on any machine that runs at all.
	const lease = 3 * time.Second
	c, nodes := setup(t, 3, redlock.WithWatchdog(lease, 500*time.Millisecond), redlock.WithNodeTimeout(50*time.Millisecond),
		redlock.WithObserver(ev.observe))
	l, err := c.Lock(context.Background(), "k", redlock.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	ev.waitFor(t, 1, renewedOK)
	nodes[0].Freeze()
	nodes[1].Freeze()
	defer nodes[0].Thaw()
	defer nodes[1].Thaw()
	<-l.Done()
	if now, deadline := time.Now(), l.Deadline(); now.Before(deadline) {
		t.Fatalf("Done closed %v before the deadline", deadline.Sub(now))
	}
	// The cause is the validity running out: found by the timer, or by the
	// last renewal try, which ended at the deadline with the frozen nodes
	// unanswered (never a node that refused).
	cause := l.Err()
	var qe *redlock.QuorumError
	if !errors.Is(cause, redlock.ErrLockLost) {
		t.Fatalf("cause = %v; want ErrLockLost", cause)
	}
	if errors.As(cause, &qe) {
		for _, n := range qe.Nodes {
			if n.Err == nil && !n.Vote {
				t.Fatalf("cause = %v; a node refused, none was expected to", cause)
			}
		}
	}
	failed := ev.waitFor(t, 2, func(e observe.Event) bool { return e.Op == "renew" && errors.Is(e.Err, redlock.ErrNotExtended) })
	for _, f := range failed {
		if !f.Lock.Deadline().Equal(l.Deadline()) {
			t.Fatal("a failed renewal moved the deadline")
		}
	}
	t.Logf("%d failed renewals before the deadline; cause: %v", len(failed), cause)
}

// WithMaxHold stops renewal: the lock ends at its deadline with a cause
// matching ErrMaxHold, and no renewal reaches a node after that.
func TestWatchdogStopsAtMaxHold(t *testing.T) {
	ev := newEvents()
	var renewCalls atomic.Int64 // node calls of renewals that have returned
	c, nodes := setup(t, 3, redlock.WithWatchdog(400*time.Millisecond, 100*time.Millisecond),
		redlock.WithMaxHold(time.Second), redlock.WithObserver(ev.observe), redlock.WithNodeObserver(func(e observe.NodeEvent) {
			if e.Op == "renew" {
				renewCalls.Add(1)
			}
		}))
	l, err := c.Lock(context.Background(), "k", redlock.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	<-l.Done()
	if err := l.Err(); !errors.Is(err, redlock.ErrLockLost) || !errors.Is(err, redlock.ErrMaxHold) {
		t.Fatalf("cause = %v, want ErrLockLost and ErrMaxHold", err)
	}
	stopped := ev.waitFor(t, 1, func(e observe.Event) bool { return e.Op == "renew" && errors.Is(e.Err, redlock.ErrMaxHold) })
	renewed := ev.waitFor(t, 1, renewedOK)
	if len(stopped) != 1 {
		t.Fatal("more than one stop")
	}
	// Every renewal round's calls have returned (a round returns at
	// quorum; the last node's answer may come later).
	guard := time.Now().Add(time.Minute)
	for renewCalls.Load() < int64(3*len(renewed)) {
		if time.Now().After(guard) {
			t.Fatalf("%d renewal calls returned, want %d", renewCalls.Load(), 3*len(renewed))
		}
		time.Sleep(time.Millisecond)
	}
	before := totalScripts(t, nodes)
	time.Sleep(300 * time.Millisecond) // three renewal intervals
	if after := totalScripts(t, nodes); after != before {
		t.Fatalf("%d scripts ran after the max hold stopped renewal", after-before)
	}
}

// A released lock is never renewed again: no script reaches a node after
// Release returned, however many renewal intervals pass.
func TestReleasedLockIsNeverRenewed(t *testing.T) {
	ev := newEvents()
	c, nodes := setup(t, 3, redlock.WithWatchdog(time.Second, 20*time.Millisecond), redlock.WithObserver(ev.observe))
	l, err := c.Lock(context.Background(), "k", redlock.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	ev.waitFor(t, 3, renewedOK)
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Close() // the release's calls to the last node end; renewal timers do not send after Close either
	before := totalScripts(t, nodes)
	time.Sleep(200 * time.Millisecond) // ten renewal intervals
	if after := totalScripts(t, nodes); after != before {
		t.Fatalf("%d scripts reached the nodes after Release", after-before)
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Done not closed by Release")
	}
	if err := l.Err(); err != redlock.ErrReleased {
		t.Fatalf("Err after Release = %v", err)
	}
}

// Run hands fn a ctx that ends when the lock is lost, and reports both.
func TestRunReportsLoss(t *testing.T) {
	ev := newEvents()
	c, nodes := setup(t, 3, redlock.WithWatchdog(time.Minute, 50*time.Millisecond), redlock.WithObserver(ev.observe))
	errWork := errors.New("work stopped")
	err := c.Run(context.Background(), "k", func(ctx context.Context) error {
		ev.waitFor(t, 1, renewedOK)
		for _, n := range nodes[:2] {
			if err := n.Restart(); err != nil {
				t.Error(err)
			}
		}
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), redlock.ErrLockLost) {
			t.Errorf("fn's ctx cause = %v", context.Cause(ctx))
		}
		return errWork
	})
	if !errors.Is(err, errWork) || !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Run = %v, want the work's error and ErrLockLost", err)
	}
	if err := c.Run(context.Background(), "k", nil); !errors.Is(err, redlock.ErrInvalidArgument) {
		t.Fatalf("Run(nil) = %v", err)
	}
}

func totalScripts(t *testing.T, nodes []*harness.Node) int {
	t.Helper()
	n := 0
	for _, nd := range nodes {
		n += scriptCalls(t, nd)
	}
	return n
}

// A panic out of Run's fn, recovered by the caller (as net/http's server
// does), releases the lock: it is not renewed on, and another Client
// takes it at once.
func TestRunPanicReleases(t *testing.T) {
	c, nodes := setup(t, 3)
	other := client(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var held *redlock.Lock
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("Run did not pass fn's panic on")
			}
		}()
		_ = c.Run(ctx, "run-panic", func(ctx context.Context) error {
			held = redlock.LockFrom(ctx)
			panic("fn")
		})
	}()
	if err := held.Err(); !errors.Is(err, redlock.ErrReleased) {
		t.Fatalf("Err after fn panicked = %v, want ErrReleased", err)
	}
	l, err := other.TryLock(ctx, "run-panic", 10*time.Second)
	if err != nil {
		t.Fatalf("another Client after fn panicked: %v", err)
	}
	_ = l.Release(ctx)
}
