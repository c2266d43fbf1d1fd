package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/clock"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/observe"
)

func TestDriftAndValidity(t *testing.T) {
	cases := []struct {
		ttl, elapsed time.Duration
		factor       float64
		drift, valid time.Duration
	}{
		{10 * time.Second, 0, 0.01, 102 * time.Millisecond, 10*time.Second - 102*time.Millisecond},
		{10 * time.Second, time.Second, 0.01, 102 * time.Millisecond, 9*time.Second - 102*time.Millisecond},
		{time.Second, 0, 0, 2 * time.Millisecond, 998 * time.Millisecond},
		{100 * time.Millisecond, 95 * time.Millisecond, 0.05, 7 * time.Millisecond, -2 * time.Millisecond},
		{time.Minute, 0, 0.1, 6002 * time.Millisecond, 54*time.Second - 2*time.Millisecond},
	}
	for _, tc := range cases {
		if d := driftBudget(tc.ttl, tc.factor); d != tc.drift {
			t.Errorf("driftBudget(%v, %v) = %v, want %v", tc.ttl, tc.factor, d, tc.drift)
		}
		if v := validity(tc.ttl, tc.elapsed, tc.factor); v != tc.valid {
			t.Errorf("validity(%v, %v, %v) = %v, want %v", tc.ttl, tc.elapsed, tc.factor, v, tc.valid)
		}
	}
}

// unreachable returns clients to a port where nothing listens: any network
// traffic would fail with a connection error, not ErrInvalidArgument.
func unreachable(n int) []redis.UniversalClient {
	c := make([]redis.UniversalClient, n)
	for i := range c {
		c[i] = redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", 1+i), ContextTimeoutEnabled: true})
	}
	return c
}

func TestNewRejectsBadInput(t *testing.T) {
	three := unreachable(3)
	dup := []redis.UniversalClient{three[0], three[1], redis.NewClient(&redis.Options{Addr: three[0].(*redis.Client).Options().Addr})}
	cases := []struct {
		name    string
		clients []redis.UniversalClient
		opts    []Option
		want    string
	}{
		{"no nodes", nil, nil, "no nodes"},
		{"65 nodes", unreachable(65), nil, "at most 64"},
		{"nil client", []redis.UniversalClient{three[0], nil, three[1]}, nil, "nil client"},
		{"duplicate address", dup, nil, "same server"},
		{"same client twice", []redis.UniversalClient{three[0], three[0], three[1]}, nil, "same server"},
		{"quorum too small", three, []Option{WithQuorum(1)}, "two holders"},
		{"quorum half of four", unreachable(4), []Option{WithQuorum(2)}, "two holders"},
		{"quorum too large", three, []Option{WithQuorum(4)}, "more than"},
		{"quorum negative", three, []Option{WithQuorum(-2)}, "at least 1"},
		{"negative timeout", three, []Option{WithNodeTimeout(-time.Second)}, "node timeout"},
		{"drift factor 1", three, []Option{WithDrift(Drift{Factor: 1})}, "drift factor"},
		{"negative drift factor", three, []Option{WithDrift(Drift{Factor: -0.1})}, "drift factor"},
		{"drift exclude without monitor", three, []Option{WithDrift(Drift{Exclude: true})}, "needs a Monitor"},
		{"negative min validity", three, []Option{WithMinValidity(-1)}, "min validity"},
		{"backoff inverted", three, []Option{WithRetryBackoff(time.Second, time.Millisecond)}, "backoff"},
		{"negative max hold", three, []Option{WithMaxHold(-time.Second)}, "max hold"},
		{"negative attempts", three, []Option{WithMaxAttempts(-1)}, "max attempts"},
		{"nil clock", three, []Option{WithClock(nil)}, "nil clock"},
		{"nil option", three, []Option{nil}, "nil option"},
		{"nil observer", three, []Option{WithObserver(func(observe.Event) {}), WithObserver(nil)}, "nil observer"},
		{"nil node observer", three, []Option{WithNodeObserver(nil)}, "nil node observer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.clients, tc.opts...)
			if err == nil {
				c.Close()
				t.Fatal("New accepted bad input")
			}
			if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalidArgument mentioning %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "redlock: ") {
				t.Fatalf("error %q lacks the redlock: prefix", err)
			}
		})
	}
}

func TestNewAcceptsQuorums(t *testing.T) {
	for _, tc := range []struct {
		q    int
		n    int
		need int
	}{{0, 5, 3}, {0, 4, 3}, {AllNodes, 5, 5}, {4, 5, 4}, {0, 1, 1}} {
		c, err := New(unreachable(tc.n), WithQuorum(tc.q))
		if err != nil {
			t.Fatal(err)
		}
		if c.Quorum() != tc.need {
			t.Errorf("quorum %+v of %d = %d, want %d", tc.q, tc.n, c.Quorum(), tc.need)
		}
		c.Close()
	}
}

func TestNewFromURLsRejectsBadURL(t *testing.T) {
	for _, urls := range [][]string{nil, {"http://x"}, {"redis://127.0.0.1:1", "not a url"}} {
		if _, err := NewFromURLs(urls); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("NewFromURLs(%q) = %v, want ErrInvalidArgument", urls, err)
		}
	}
	c, err := NewFromURLs([]string{"redis://127.0.0.1:1", "rediss://user:pw@127.0.0.1:2/3", "redis://127.0.0.1:3"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Addrs(), " "); got != "127.0.0.1:1 127.0.0.1:2/3 127.0.0.1:3" {
		t.Errorf("Nodes = %s", got)
	}
	c.Close()
}

func TestLockRejectsBadInputBeforeNetwork(t *testing.T) {
	c, err := New(unreachable(3), WithNodeTimeout(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	cases := []struct {
		name string
		keys []string
		ttl  time.Duration
		want string
	}{
		{"empty key", []string{""}, time.Second, "empty key"},
		{"no keys", nil, time.Second, "no keys"},
		{"duplicate key", []string{"a", "a"}, time.Second, "duplicate key"},
		{"sub-millisecond ttl", []string{"a"}, 500 * time.Microsecond, "at least 1ms"},
		{"negative ttl", []string{"a"}, -time.Second, "at least 1ms"},
		{"ttl inside drift budget", []string{"a"}, 2 * time.Millisecond, "drift budget"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := c.TryLockKeys(ctx, tc.keys, tc.ttl)
			if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalidArgument with %q", err, tc.want)
			}
			_, err = c.LockKeys(ctx, tc.keys, tc.ttl)
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("LockKeys err = %v", err)
			}
			if time.Since(start) > time.Second {
				t.Fatal("bad input took network time")
			}
		})
	}
	//lint:ignore SA1012 testing the nil check
	if _, err := c.TryLock(nil, "a", time.Second); !errors.Is(err, ErrInvalidArgument) { //nolint:staticcheck
		t.Fatalf("nil ctx: %v", err)
	}
}

func TestClusterKeysMustShareSlot(t *testing.T) {
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	c, err := New([]redis.UniversalClient{cl})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	defer cl.Close()
	_, err = c.TryLockKeys(context.Background(), []string{"order:1", "order:2"}, time.Second)
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "hash slot") {
		t.Fatalf("err = %v", err)
	}
}

func TestClosedClient(t *testing.T) {
	c, err := New(unreachable(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryLock(context.Background(), "a", time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("err = %v, want ErrClosed", err)
	}
}

func TestQuorumErrorShape(t *testing.T) {
	qe := &QuorumError{Op: "acquire", Keys: []string{"k"}, Need: 2, Got: 1, Attempts: 3,
		Nodes: []observe.NodeResult{{Addr: "a:1", Vote: true, Latency: time.Millisecond}, {Addr: "b:1"}, {Addr: "c:1", Err: context.DeadlineExceeded}},
		Err:   ErrNotObtained, Cause: context.Canceled}
	var err error = fmt.Errorf("wrapped: %w", qe)
	if !errors.Is(err, ErrNotObtained) || !errors.Is(err, context.Canceled) {
		t.Fatal("errors.Is does not see the sentinel and the cause")
	}
	if errors.Is(err, ErrLockLost) {
		t.Fatal("matches a foreign sentinel")
	}
	var got *QuorumError
	if !errors.As(err, &got) || len(got.Nodes) != 3 || !got.Nodes[2].Timeout() || got.Nodes[1].Timeout() {
		t.Fatalf("errors.As: %+v", got)
	}
	msg := err.Error()
	for _, want := range []string{"redlock: lock not obtained: acquire", "got 1 of 2 needed after 3 attempts", "context canceled", "held elsewhere on 1 of 3 nodes", "c:1: timed out"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
}

func TestBackoffBounds(t *testing.T) {
	c := &Client{o: defaults()}
	c.o.retryMin, c.o.retryMax = 4*time.Millisecond, 64*time.Millisecond
	for attempt := 1; attempt < 100; attempt++ {
		want := c.o.retryMax
		if attempt < 6 {
			want = c.o.retryMin << (attempt - 1)
		}
		for i := 0; i < 50; i++ {
			d := c.backoff(&c.o.callOptions, attempt)
			if d < want/2 || d > want {
				t.Fatalf("backoff(%d) = %v, want in [%v, %v]", attempt, d, want/2, want)
			}
		}
	}
}

func TestCallTimeoutCappedByTTL(t *testing.T) {
	c := &Client{o: defaults()}
	if got := c.callTimeout(10 * time.Second); got != defaultNodeTimeout {
		t.Errorf("callTimeout(10s) = %v", got)
	}
	if got := c.callTimeout(100 * time.Millisecond); got != 10*time.Millisecond {
		t.Errorf("callTimeout(100ms) = %v", got)
	}
}

func TestLockHandleAccessorsWithFakeClock(t *testing.T) {
	fc := clock.NewFake(time.Unix(100, 0))
	c := &Client{o: defaults()}
	c.o.clock = fc
	l := &Lock{c: c, typ: plain{}, keys: []string{"a", "b"}, owner: "0123456789abcdefghijkl", ttl: time.Second,
		deadline: fc.Now().Add(validity(time.Second, 0, c.o.driftFactor))}
	done := l.Done() // sets the timer for the deadline, on the fake clock
	if got := l.Remaining(); got != 988*time.Millisecond {
		t.Fatalf("Remaining = %v", got)
	}
	fc.Advance(900 * time.Millisecond)
	if got := l.Remaining(); got != 88*time.Millisecond {
		t.Fatalf("Remaining = %v", got)
	}
	select {
	case <-done:
		t.Fatal("Done closed before the deadline")
	default:
	}
	if err := l.Err(); err != nil {
		t.Fatalf("Err before the deadline = %v", err)
	}
	fc.Advance(time.Second)
	if got := l.Remaining(); got != 0 {
		t.Fatalf("Remaining after deadline = %v", got)
	}
	<-done // the timer fired at the deadline on the fake clock
	if err := context.Cause(l.Context()); !errors.Is(err, ErrLockLost) || !errors.Is(l.Err(), ErrLockLost) {
		t.Fatalf("cause after the deadline = %v, Err = %v", err, l.Err())
	}
	if l.Key() != "a" || len(l.Keys()) != 2 || l.Owner() == "" {
		t.Fatal("accessors")
	}
	l.Keys()[0] = "mutated"
	if l.Key() != "a" {
		t.Fatal("Keys exposes internal slice")
	}
	// Extend of a lost lock fails without network traffic (this Client
	// has no nodes to send to), with the loss as its cause: the same
	// ErrLockLost as when no timer had ended the Lock first.
	if err := l.Extend(context.Background(), time.Second); !errors.Is(err, ErrNotHeld) || !errors.Is(err, ErrLockLost) {
		t.Fatalf("Extend after deadline = %v, want ErrNotHeld and ErrLockLost", err)
	}
}

func TestOwnerValues(t *testing.T) {
	c, err := New(unreachable(1), WithName("pod-7"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		o, err := c.newOwner()
		if err != nil {
			t.Fatal(err)
		}
		id, random := splitOwner(o)
		if id != c.ID() || len(random) != 22 || seen[o] {
			t.Fatalf("owner %q: client %q (want %q), random part %q, repeated %v", o, id, c.ID(), random, seen[o])
		}
		seen[o] = true
	}
}

func TestDoneContextBeforeNetwork(t *testing.T) {
	var seen []string
	tagged := func(tag string) Option {
		return WithObserver(func(e observe.Event) {
			seen = append(seen, fmt.Sprintf("%s:%s:%d:%v:%v", tag, e.Op, e.Attempts, e.Lock == nil, errors.Is(e.Err, context.Canceled)))
		})
	}
	c, err := New(unreachable(3), WithNodeTimeout(time.Hour), tagged("a"), tagged("b"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = c.Lock(ctx, "k", time.Second)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrNotObtained) {
		t.Fatalf("err = %v", err)
	}
	// Both observers, in order, see a failed acquisition with no round
	// and no lock handle.
	if got := strings.Join(seen, " "); got != "a:acquire:0:true:true b:acquire:0:true:true" {
		t.Fatalf("events = %s", got)
	}
}

func TestInflightWaitsForLateAdds(t *testing.T) {
	var f inflight
	f.Add(1)
	released := make(chan struct{})
	go func() {
		f.Add(1) // a call that started while Wait is pending
		close(released)
		time.Sleep(10 * time.Millisecond)
		f.Done()
		f.Done()
	}()
	<-released
	f.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n != 0 {
		t.Fatalf("Wait returned with %d in flight", f.n)
	}
}

// What an attempt must undo follows from each node's answer: a yes or an
// unknown outcome may have left our value there; a plain no or a call
// never sent cannot.
func TestMayHold(t *testing.T) {
	clients := unreachable(5)
	for _, cl := range clients {
		cl.(*redis.Client).Options().MaxRetries = -1 // as NewFromURLs makes them
	}
	c, err := New(clients)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mayHold := func(v quorum.Vote) bool { return c.mayHold(0, v) }
	if !mayHold(quorum.Vote{OK: true, Done: true}) || !mayHold(quorum.Vote{Err: context.DeadlineExceeded, Done: true}) {
		t.Fatal("a yes or a timeout must count as possibly held")
	}
	if mayHold(quorum.Vote{Done: true}) || mayHold(quorum.Vote{Err: errNodeSkipped, Done: true}) || mayHold(quorum.Vote{Err: errNotSent}) ||
		mayHold(quorum.Vote{Err: errReleasePending}) || mayHold(quorum.Vote{Err: redis.ErrClosed}) {
		t.Fatal("a plain no or an unsent call cannot hold our value")
	}
}
