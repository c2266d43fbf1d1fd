package invariant

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe"
)

// TestConcurrentExtendsKeepNodesAndDeadlineInStep: two Extends of one
// Lock at once, one shortening (2 s) and one keeping (30 s) a 30 s lock.
// Whichever order the nodes apply them in, once both returned the Lock
// must not report more validity than a quorum of nodes holds.
func TestConcurrentExtendsKeepNodesAndDeadlineInStep(t *testing.T) {
	cl := startCluster(t, 0)
	chk := newChecker(t, cl.nodes)
	chk.silent = true
	c := newClient(t, cl.urls())
	defer closeGuarded(t, "client", c)
	const trials = 150
	failed := 0
	var first string
	for i := 0; i < trials; i++ {
		ctx, cancel := bg(10 * time.Second)
		l, err := c.Lock(ctx, "k", 30*time.Second)
		if err != nil {
			cancel()
			t.Fatalf("trial %d: Lock: %v", i, err)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, ttl := range []time.Duration{2 * time.Second, 30 * time.Second} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_ = l.Extend(ctx, ttl)
			}()
		}
		close(start)
		wg.Wait()
		if v := chk.verify(l); v != "" {
			failed++
			if first == "" {
				first = v
			}
		}
		_ = l.Release(ctx)
		cancel()
	}
	if failed > 0 {
		t.Errorf("%d of %d trials: after Extend(2s) and Extend(30s) at once the Lock reports more than the nodes hold; first: %s", failed, trials, first)
	}
}

// TestObserverReleaseOnLostDoesNotWedge: an observer that releases a Lock
// on its "lost" event (a natural clean-up) must not stop the Client: the
// Release returns, other watchdog locks go on being renewed, Close returns.
func TestObserverReleaseOnLostDoesNotWedge(t *testing.T) {
	cl := startCluster(t, 0)
	chk := newChecker(t, cl.nodes)
	chk.silent = true
	released := make(chan error, 1)
	renewed := make(chan struct{}, 100)
	const lease = 2 * time.Second
	c := newClient(t, cl.urls(), redlock.WithWatchdog(lease, lease/3),
		redlock.WithObserver(func(ev observe.Event) {
			switch {
			case ev.Op == "lost" && ev.Lock != nil && ev.Lock.Key() == "lost":
				ctx, cancel := bg(2 * time.Second)
				defer cancel()
				released <- ev.Lock.Release(ctx)
			case ev.Op == "renew" && ev.Lock != nil && ev.Lock.Key() == "kept":
				select {
				case renewed <- struct{}{}:
				default:
				}
			}
		}))
	ctx, cancel := bg(30 * time.Second)
	defer cancel()
	l1, err := c.Lock(ctx, "lost", redlock.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	chk.delAll(t, "lost") // the next renewal finds it gone
	select {
	case <-l1.Done():
	case <-time.After(20 * time.Second):
		t.Fatalf("a watchdog lock deleted on every node was not lost within 20s: %v", l1.Err())
	}
	select {
	case err := <-released:
		t.Logf("observer's Release on lost returned: %v", err)
	case <-time.After(10 * time.Second):
		dumpStacks(t)
		t.Fatalf("the observer's Release on a lost Lock did not return within 10s: the Client is wedged (Close skipped: it would hang)")
	}
	l2, err := c.Lock(ctx, "kept", redlock.Watchdog)
	if err != nil {
		t.Fatal(err)
	}
	// Any renewal of l2, whatever its outcome, shows the renewals go on.
	select {
	case <-renewed:
	case <-time.After(3 * lease):
		t.Errorf("no renewal of another watchdog lock within %v after an observer released a lost one: renewals stopped", 3*lease)
	}
	if !guard(10*time.Second, func() { _ = l2.Release(ctx) }) {
		dumpStacks(t)
		t.Fatalf("Release did not return within 10s (wedged; Close skipped)")
	}
	closeGuarded(t, "client", c)
}

// TestLostLockIsNotHandedOn: a Lock whose renewal, in flight when Release
// was called, found it gone from the nodes must not be handed on to a
// waiter of the same Client as if it were still held. The nodes answer
// slowly (proxy latency) so that a renewal is often in flight at Release;
// only trials where a renewal that saw the deletion started before
// Release count (otherwise the library could not know).
func TestLostLockIsNotHandedOn(t *testing.T) {
	cl := startCluster(t, 0)
	chk := newChecker(t, cl.nodes)
	chk.silent = true
	type renewal struct {
		l     *redlock.Lock
		begin time.Time // at or after the renewal's start
		end   time.Time // after it ended
		no    int       // nodes that answered and did not extend
	}
	var mu sync.Mutex
	var renewals []renewal
	c := newClient(t, cl.urls(), redlock.WithNodeTimeout(3*time.Second), redlock.WithWatchdog(10*time.Second, time.Second),
		redlock.WithObserver(func(ev observe.Event) {
			if ev.Op != "renew" {
				return
			}
			no := 0
			for _, n := range ev.Nodes {
				if !n.Vote && n.Err == nil {
					no++
				}
			}
			mu.Lock()
			l, _ := ev.Lock.(*redlock.Lock)
			renewals = append(renewals, renewal{l, time.Now().Add(-ev.Elapsed), time.Now(), no})
			mu.Unlock()
		}))
	defer closeGuarded(t, "client", c)
	qualified, failed := 0, 0
	var first string
	for trial := 0; trial < 30 && qualified < 5; trial++ {
		ctx, cancel := bg(30 * time.Second)
		a, err := c.Lock(ctx, "k", redlock.Watchdog)
		if err != nil {
			cancel()
			t.Fatalf("A: %v", err)
		}
		got := make(chan *redlock.Lock, 1)
		go func() {
			b, err := c.Lock(ctx, "k", redlock.Watchdog)
			if err != nil {
				b = nil
			}
			got <- b
		}()
		time.Sleep(300 * time.Millisecond) // B waits in the Client's queue
		// A renewal (call timeout: a tenth of the lease) takes 600 ms of
		// every 1 s interval.
		cl.latency(300 * time.Millisecond)
		chk.delAll(t, "k")
		time.Sleep(time.Duration(trial%7) * 150 * time.Millisecond)
		call := time.Now()
		_ = a.Release(ctx)
		b := <-got
		// Checked at once: a watchdog Lock handed on soon learns at its
		// first renewal that it is gone, and ends.
		var v string
		if b != nil {
			v = chk.verify(b)
		}
		cl.latency(0)
		mu.Lock()
		knew := false
		for _, r := range renewals {
			if r.l == a && r.begin.Before(call) && r.no >= chk.need {
				knew = true
			}
		}
		mu.Unlock()
		if knew && b != nil {
			qualified++
			handed := b.Owner() == a.Owner()
			if v == "" && handed {
				v = "B took A's owner value, handed on locally"
			}
			if v != "" {
				failed++
				if first == "" {
					first = v
				}
				t.Logf("trial %d: the waiter got A's lost lock (handed on %v): %s", trial, handed, v)
			}
		}
		if b != nil {
			_ = b.Release(ctx)
		}
		cancel()
	}
	if qualified == 0 {
		t.Skip("no trial had a renewal in flight at Release that saw the deletion")
	}
	if failed > 0 {
		t.Errorf("%d of %d qualifying trials: a lock found lost by the renewal Release waited for was handed on to the waiter; first: %s", failed, qualified, first)
	}
}

// TestReleaseWaitsForExtendBeforeHandoff: Release while an Extend(2s) of a
// 30 s Lock is in flight, with a waiter of the same Client queued: once
// the Extend returned, whatever the waiter got must be held on the nodes
// as long as it reports.
func TestReleaseWaitsForExtendBeforeHandoff(t *testing.T) {
	cl := startCluster(t, 0)
	chk := newChecker(t, cl.nodes)
	chk.silent = true
	c := newClient(t, cl.urls(), redlock.WithNodeTimeout(3*time.Second))
	defer closeGuarded(t, "client", c)
	const trials = 5
	failed, handed := 0, 0
	var first string
	for trial := 0; trial < trials; trial++ {
		ctx, cancel := bg(30 * time.Second)
		a, err := c.Lock(ctx, "k", 30*time.Second)
		if err != nil {
			cancel()
			t.Fatalf("A: %v", err)
		}
		got := make(chan *redlock.Lock, 1)
		go func() {
			b, err := c.Lock(ctx, "k", 30*time.Second)
			if err != nil {
				b = nil
			}
			got <- b
		}()
		time.Sleep(300 * time.Millisecond) // B waits in the Client's queue
		// Inside the call timeout of a 2 s TTL (200 ms) both ways.
		cl.latency(50 * time.Millisecond)
		extended := make(chan error, 1)
		go func() { extended <- a.Extend(ctx, 2*time.Second) }()
		time.Sleep(25 * time.Millisecond) // the Extend is on its way
		_ = a.Release(ctx)
		eerr := <-extended
		b := <-got
		cl.latency(0)
		if b == nil {
			cancel()
			t.Fatalf("trial %d: B got nothing", trial)
		}
		if b.Owner() == a.Owner() {
			handed++
		}
		if v := chk.verify(b); v != "" {
			failed++
			if first == "" {
				first = v
			}
			t.Logf("trial %d: Extend: %v; B handed on: %v", trial, eerr, b.Owner() == a.Owner())
		}
		_ = b.Release(ctx)
		cancel()
	}
	t.Logf("handed on locally in %d of %d trials", handed, trials)
	if failed > 0 {
		t.Errorf("%d of %d trials: after Release raced an Extend(2s), the waiter's Lock reports more than the nodes hold; first: %s", failed, trials, first)
	}
}

// The failure text for an ACL Client that took no lock names what was
// observed first: with every node timing out it says so and clears the
// ACL line; only a NOPERM reply names the ACL line as the cause.
func TestACLCauseNamesObserved(t *testing.T) {
	timeout := &redlock.QuorumError{Err: redlock.ErrNotObtained, Need: 2, Nodes: []observe.NodeResult{
		{Addr: "a:1", Err: context.DeadlineExceeded}, {Addr: "b:1", Err: context.DeadlineExceeded}, {Addr: "c:1", Vote: true}}}
	noperm := &redlock.QuorumError{Err: redlock.ErrNotObtained, Need: 2, Nodes: []observe.NodeResult{
		{Addr: "a:1", Err: replyErr("NOPERM User acl has no permissions to run the 'evalsha' command")}, {Addr: "b:1", Vote: true}}}
	for _, tc := range []struct {
		err       error
		want, not string
	}{
		{timeout, "timed out:6", "NOPERM"},
		{noperm, "the ACL line lacks", "not the ACL line"},
	} {
		chk := &checker{}
		for range 3 {
			chk.failed("acl", tc.err, time.Now())
		}
		msg := aclCause(chk)
		if !strings.Contains(msg, tc.want) || strings.Contains(msg, tc.not) || !strings.HasPrefix(msg, "3 acquisitions failed") {
			t.Errorf("%v: %s", tc.err, msg)
		}
	}
}

// replyErr is an error reply of a node (a redis.Error).
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}
