// Package redlocktest lets you unit-test code that takes redlock locks
// without a Redis server: contention, expiry on a test-driven clock, a lock
// lost while held (its Done fires), fencing tokens and node faults, with
// the errors of the real Client (ErrNotObtained, ErrLockLost, ErrNotHeld,
// *redlock.QuorumError).
//
// A Cluster is N in-process Redis nodes (miniredis, which runs the
// library's own Lua scripts) and one fake clock. Cluster.Client returns a
// real *redlock.Client over those nodes, so every behaviour is the
// library's own, not a model of it; several Clients behave as several
// processes contending for the same keys. Conformance runs the same checks
// against a Cluster and against real redis-server nodes, so that the two
// cannot drift apart.
//
// Time moves only when the test says so: Advance moves the Clients' clock
// and the nodes' clock together, so keys expire on the nodes when the
// Client's deadlines say, a Lock's Done fires at its deadline and
// watchdog renewals run at their intervals (each to its end, in order).
// Advance returns once what it caused has been delivered: a test checks
// Done, Err, Context and its observers right after it, with no sleep.
// Network calls themselves take real (short) time and are not counted on
// the fake clock.
//
// A Lock's Deadline is on the fake clock (it starts at Start, in 2030), so
// context.WithDeadline(ctx, l.Deadline()) is a real-time deadline that
// never arrives in a test. The context that ends at the deadline on the
// fake clock, and at any other loss, is l.Context() (or the ctx Run hands
// its function): the README's pattern, which also ends its work ctx with
// context.AfterFunc(l.Context(), cancel), stops at the fake deadline too,
// but AfterFunc cancels on a goroutine of its own, so wait for that ctx
// (<-work.Done()) rather than poll it.
//
// A blocking Lock (or Run) on a key held elsewhere polls the nodes in real
// time, at most 100ms apart (its backoff), and is woken at once by a
// release: it returns once the holder releases, once another goroutine
// calls Advance past the holder's TTL, or when its ctx ends. A test that
// only wants to see contention should use TryLock, or Lock with a ctx that
// has a (real-time) timeout.
//
// A Cluster and its Clients are safe for concurrent use; Advance calls
// run one at a time.
package redlocktest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
)

// Start is the time at which every Cluster's clock starts, so that tests
// (fencing tokens, deadlines) are the same on every run.
var Start = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// nodeTimeout is the Clients' default per-node timeout: generous, since
// the fake clock does not count the calls' real time against validity,
// and a loaded test machine must not turn a slow answer into a lost vote.
const nodeTimeout = 2 * time.Second

// Cluster is a set of in-process Redis nodes sharing one fake clock.
type Cluster struct {
	t       testing.TB
	servers []*miniredis.Miniredis
	clients []*redis.Client
	clock   *stepClock
	track   tracker // the live Locks of the Cluster's Clients
	mu      sync.Mutex
	other   *redlock.Client // the holder of Hold; made on first use, under mu
}

// Option configures New.
type Option func(*config)

type config struct{ nodes int }

// NodeCount sets the number of nodes (default 3).
func NodeCount(n int) Option { return func(c *config) { c.nodes = n } }

// New starts the nodes of a Cluster; t.Cleanup stops them and closes every
// Client made by the Cluster. It fails the test if a node cannot start
// or for fewer than one node.
func New(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	cfg := config{nodes: 3}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.nodes < 1 {
		t.Fatalf("redlocktest: %d nodes: need at least 1", cfg.nodes)
	}
	c := &Cluster{t: t, clock: &stepClock{now: Start}}
	c.clock.setTime = c.setNodeTime
	for i := 0; i < cfg.nodes; i++ {
		m := miniredis.NewMiniRedis()
		if err := m.Start(); err != nil {
			t.Fatalf("redlocktest: node %d: %v", i, err)
		}
		m.SetTime(Start)
		m.ClockTTL(true) // keys expire as SetTime moves; TIME follows it too
		t.Cleanup(m.Close)
		cl := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { _ = cl.Close() })
		c.servers = append(c.servers, m)
		c.clients = append(c.clients, cl)
	}
	return c
}

func (c *Cluster) setNodeTime(now time.Time) {
	for _, m := range c.servers {
		m.SetTime(now)
	}
}

// Client returns a new redlock.Client over the Cluster's nodes (a process
// of its own: its locks contend with every other Client's), on the
// Cluster's clock. Its defaults are redlock.New's but for a per-node
// timeout of 2s (real time, which the fake clock does not count against
// validity; a loaded test machine must not turn a slow answer into a lost
// vote) and the restart quarantine off (the nodes never restart, and their
// INFO names no process to judge). opts come after these and may
// override them. The Client is closed by t.Cleanup; the test fails if New
// refuses opts.
func (c *Cluster) Client(opts ...redlock.Option) *redlock.Client {
	c.t.Helper()
	cl, err := c.newClient(opts)
	if err != nil {
		c.t.Fatalf("redlocktest: %v", err)
	}
	return cl
}

func (c *Cluster) newClient(opts []redlock.Option) (*redlock.Client, error) {
	nodes := make([]redis.UniversalClient, len(c.clients))
	for i, cl := range c.clients {
		nodes[i] = cl
	}
	all := append([]redlock.Option{
		redlock.WithClock(c.clock),
		redlock.WithNodeTimeout(nodeTimeout),
		redlock.WithRestartQuarantine(redlock.QuarantineOff),
	}, opts...)
	all = append(all, redlock.WithObserver(c.track.observe)) // last: it hears of an event after the test's observers
	cl, err := redlock.New(nodes, all...)
	if err != nil {
		return nil, err
	}
	c.t.Cleanup(func() { _ = cl.Close() })
	return cl, nil
}

// Now returns the Cluster's time (the Clients' clock).
func (c *Cluster) Now() time.Time { return c.clock.Now() }

// Advance moves the time of the Clients and of the nodes d forward
// together. Timers that fall due run in order, each at its own time and
// to its end: a Lock of the Cluster's Clients whose deadline passes ends
// then (whether or not its Done or Context was called before), watchdog
// locks are renewed at their intervals, keys whose TTL passes are gone
// from the nodes. Advance returns once every Lock that ended meanwhile is
// ended for every observer: Done closed, Context cancelled with Err as its
// cause, Err set, and the Clients' WithObserver functions called with its
// "lost" event (a renewal's loss is reported on a goroutine of its
// Client's: Advance waits for it). It waits at most 10s of real time for
// each timer and for those deliveries, so that a timer blocked on
// something only a later Advance brings cannot hang the test. What it
// cannot wait for is the code under test's own goroutines, such as a
// context.AfterFunc(l.Context(), cancel): wait on what they produce.
func (c *Cluster) Advance(d time.Duration) {
	c.track.arm()
	c.clock.Advance(d)
	c.clock.wait(timerWait) // timers set to fire at once (a Lock first watched past its deadline)
	c.track.settle(timerWait)
}

// Lose deletes keys on every node, as if another party had taken them or
// the nodes had lost them: the holder's next Extend or watchdog renewal
// fails with ErrLockLost and its Done closes. Until then the holder does
// not know.
func (c *Cluster) Lose(keys ...string) {
	for _, m := range c.servers {
		for _, k := range keys {
			m.Del(k)
		}
	}
}

// Expire advances the time to just past l's deadline and the end of its
// keys' TTL on every node, so that l is Done when Expire returns and others
// can take its keys.
// A watchdog lock is renewed on the way and so does not expire: use Lose.
func (c *Cluster) Expire(l *redlock.Lock) {
	l.Done() // arms l's deadline timer (armed on first use), so that it fires in Advance
	d := l.Deadline().Sub(c.Now()) + time.Millisecond
	for _, m := range c.servers {
		for _, k := range l.Keys() {
			if ttl := m.TTL(k); ttl+time.Millisecond > d {
				d = ttl + time.Millisecond
			}
		}
	}
	if d > 0 {
		c.Advance(d)
	}
}

// Hold takes key for ttl (redlock.Watchdog: until released) as another
// process would, so that the code under test meets contention. It fails
// the test if key is not free. Release the returned Lock, or let the
// time pass its ttl, to free the key.
func (c *Cluster) Hold(key string, ttl time.Duration) *redlock.Lock {
	c.t.Helper()
	c.mu.Lock()
	if c.other == nil {
		var err error
		if c.other, err = c.newClient([]redlock.Option{redlock.WithName("redlocktest-holder")}); err != nil {
			c.mu.Unlock()
			c.t.Fatalf("redlocktest: %v", err)
		}
	}
	other := c.other
	c.mu.Unlock()
	l, err := other.TryLock(context.Background(), key, ttl)
	if err != nil {
		c.t.Fatalf("redlocktest: hold %q: %v", key, err)
	}
	return l
}

// FailNode makes node i (0-based) answer every command with an error
// while on is true, and heal when it is false. With too few nodes left for
// a quorum, calls fail with the usual sentinels and a *redlock.QuorumError
// naming the failed nodes.
func (c *Cluster) FailNode(i int, on bool) {
	c.t.Helper()
	if i < 0 || i >= len(c.servers) {
		c.t.Fatalf("redlocktest: FailNode(%d): the cluster has %d nodes", i, len(c.servers))
	}
	msg := ""
	if on {
		msg = fmt.Sprintf("ERR redlocktest: node %d failed", i)
	}
	c.servers[i].SetError(msg)
}

// Addrs returns the nodes' addresses (host:port), in order.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.servers))
	for i, m := range c.servers {
		out[i] = m.Addr()
	}
	return out
}
