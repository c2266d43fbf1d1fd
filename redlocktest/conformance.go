package redlocktest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe"
)

// Env is what Conformance needs of a set of nodes: a Cluster (Cluster.Env)
// or real redis-server nodes.
type Env struct {
	// Client returns a new Client over the nodes (another process), with
	// opts after the env's own; the env closes it when the test ends.
	Client func(opts ...redlock.Option) *redlock.Client
	// Advance lets d pass: the Cluster moves its clock, real nodes sleep.
	Advance func(d time.Duration)
	// Lose deletes key on every node.
	Lose func(key string)
	// TTL is the checks' lock TTL: on real nodes, long enough next to a
	// round trip that no check depends on the machine's speed, and short
	// enough to sleep through a few times.
	TTL time.Duration
}

// Env returns the Cluster as a Conformance Env, with a TTL of 10s.
func (c *Cluster) Env() Env {
	return Env{Client: c.Client, Advance: c.Advance, Lose: func(key string) { c.Lose(key) }, TTL: 10 * time.Second}
}

// check is one conformance check; keys are unique per check and run.
type check struct {
	name string
	fn   func(t testing.TB, env Env, key string)
}

var checks = []check{
	{"InvalidInputBeforeTraffic", checkInvalid},
	{"Contention", checkContention},
	{"ExpiryFreesKey", checkExpiry},
	{"ReleaseFreesKey", checkRelease},
	{"ExtendOutlivesFirstTTL", checkExtend},
	{"LoseThenExtendIsLost", checkLoseExtend},
	{"WatchdogRenewsThenLoses", checkWatchdog},
	{"FencingTokensIncrease", checkFencing},
	{"ReleaseTwiceNotHeld", checkReleaseTwice},
}

var runs atomic.Int64

// Conformance runs the same checks of the locking behaviour that users
// rely on against env: contention errors (ErrNotObtained with a
// *redlock.QuorumError), expiry, Release, Extend, a lost lock (ErrLockLost,
// Done), watchdog renewal and loss, fencing tokens, ErrNotHeld, and bad
// input refused before any traffic. redlocktest runs it against a Cluster
// and the integration tests against redis-server, so a Cluster behaves as
// real nodes do. Each check is a subtest.
func Conformance(t *testing.T, env Env) {
	run := runs.Add(1)
	for _, ch := range checks {
		t.Run(ch.name, func(t *testing.T) {
			ch.fn(t, env, fmt.Sprintf("redlocktest:%s:%d:%d", ch.name, time.Now().UnixNano(), run))
		})
	}
}

func checkInvalid(t testing.TB, env Env, key string) {
	var calls atomic.Int64
	c := env.Client(redlock.WithNodeObserver(func(observe.NodeEvent) { calls.Add(1) }))
	ctx := context.Background()
	if _, err := c.TryLock(ctx, "", time.Second); !errors.Is(err, redlock.ErrInvalidArgument) {
		t.Errorf("TryLock of an empty key: %v, want ErrInvalidArgument", err)
	}
	if _, err := c.TryLock(ctx, key, -time.Second); !errors.Is(err, redlock.ErrInvalidArgument) {
		t.Errorf("TryLock with ttl -1s: %v, want ErrInvalidArgument", err)
	}
	if _, err := c.Lock(ctx, key, time.Microsecond); !errors.Is(err, redlock.ErrInvalidArgument) {
		t.Errorf("Lock with ttl 1µs: %v, want ErrInvalidArgument", err)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("bad input sent %d node calls, want none", n)
	}
}

func mustLock(t testing.TB, c *redlock.Client, key string, ttl time.Duration) *redlock.Lock {
	t.Helper()
	l, err := c.TryLock(context.Background(), key, ttl)
	if err != nil {
		t.Fatalf("TryLock %q of a free key: %v", key, err)
	}
	return l
}

func checkContention(t testing.TB, env Env, key string) {
	a, b := env.Client(), env.Client()
	mustLock(t, a, key, env.TTL)
	_, err := b.TryLock(context.Background(), key, env.TTL)
	var qe *redlock.QuorumError
	if !errors.Is(err, redlock.ErrNotObtained) || !errors.As(err, &qe) {
		t.Fatalf("TryLock of a held key: %v, want ErrNotObtained with a *QuorumError", err)
	}
	if qe.Op != observe.OpAcquire || len(qe.Nodes) == 0 {
		t.Errorf("QuorumError: Op %q with %d nodes, want %q with every node", qe.Op, len(qe.Nodes), observe.OpAcquire)
	}
}

// doneWait bounds waitDone; the tests of the checks shorten it.
var doneWait = 10 * time.Second

// waitDone waits (in real time, generously) for l's Done; the env has
// already let l's time pass, so only a broken Lock waits out the bound.
func waitDone(t testing.TB, l *redlock.Lock, what string) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(doneWait):
		t.Fatalf("%s: Done not closed", what)
	}
	if err := l.Err(); !errors.Is(err, redlock.ErrLockLost) {
		t.Errorf("%s: Err %v, want ErrLockLost", what, err)
	}
}

func checkExpiry(t testing.TB, env Env, key string) {
	a, b := env.Client(), env.Client()
	l := mustLock(t, a, key, env.TTL)
	env.Advance(env.TTL + env.TTL/2)
	waitDone(t, l, "past the TTL")
	mustLock(t, b, key, env.TTL)
}

func checkRelease(t testing.TB, env Env, key string) {
	a, b := env.Client(), env.Client()
	l := mustLock(t, a, key, env.TTL)
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	mustLock(t, b, key, env.TTL)
}

func checkExtend(t testing.TB, env Env, key string) {
	a, b := env.Client(), env.Client()
	l := mustLock(t, a, key, env.TTL)
	if err := l.Extend(context.Background(), 10*env.TTL); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	env.Advance(env.TTL + env.TTL/2)
	if err := l.Err(); err != nil {
		t.Fatalf("extended lock past its first TTL: Err %v", err)
	}
	if _, err := b.TryLock(context.Background(), key, env.TTL); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("TryLock of an extended lock past its first TTL: %v, want ErrNotObtained", err)
	}
}

func checkLoseExtend(t testing.TB, env Env, key string) {
	l := mustLock(t, env.Client(), key, env.TTL)
	env.Lose(key)
	if err := l.Extend(context.Background(), env.TTL); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Extend of a lost lock: %v, want ErrLockLost", err)
	}
	waitDone(t, l, "Extend of a lost lock")
	if err := l.Release(context.Background()); !errors.Is(err, redlock.ErrNotHeld) {
		t.Errorf("Release of a lost lock: %v, want ErrNotHeld", err)
	}
}

func checkWatchdog(t testing.TB, env Env, key string) {
	lease := 2 * env.TTL
	a := env.Client(redlock.WithWatchdog(lease, lease/4))
	l, err := a.Lock(context.Background(), key, redlock.Watchdog)
	if err != nil {
		t.Fatalf("Lock in watchdog mode: %v", err)
	}
	env.Advance(2 * lease) // eight renewal intervals
	if err := l.Err(); err != nil {
		t.Fatalf("watchdog lock after two leases: Err %v", err)
	}
	if _, err := env.Client().TryLock(context.Background(), key, env.TTL); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("TryLock of a renewed watchdog lock: %v, want ErrNotObtained", err)
	}
	env.Lose(key)
	env.Advance(lease / 2) // two renewals
	waitDone(t, l, "watchdog lock after Lose")
}

func checkFencing(t testing.TB, env Env, key string) {
	a, b := env.Client(redlock.WithFencing()), env.Client(redlock.WithFencing())
	l1 := mustLock(t, a, key, env.TTL)
	if err := l1.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	l2 := mustLock(t, b, key, env.TTL)
	env.Advance(env.TTL + env.TTL/2) // l2 expires unreleased
	l3 := mustLock(t, a, key, env.TTL)
	t1, t2, t3 := l1.Token(), l2.Token(), l3.Token()
	if t1 <= 0 || t2 <= t1 || t3 <= t2 {
		t.Fatalf("fencing tokens %d, %d, %d: want positive and strictly increasing", t1, t2, t3)
	}
}

func checkReleaseTwice(t testing.TB, env Env, key string) {
	l := mustLock(t, env.Client(), key, env.TTL)
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := l.Release(context.Background()); !errors.Is(err, redlock.ErrNotHeld) {
		t.Fatalf("second Release: %v, want ErrNotHeld", err)
	}
}
