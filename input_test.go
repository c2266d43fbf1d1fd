package redlock

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A typed nil in the slice is a nil client too, named by its index.
func TestNewRejectsTypedNil(t *testing.T) {
	three := unreachable(3)
	for _, nilClient := range []redis.UniversalClient{(*redis.Client)(nil), (*redis.ClusterClient)(nil), (*redis.Ring)(nil)} {
		_, err := New([]redis.UniversalClient{three[0], three[1], nilClient})
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "node 2: nil client") {
			t.Errorf("New with %T(nil) = %v, want ErrInvalidArgument naming node 2", nilClient, err)
		}
	}
}

// One server must not cast two votes: any database, any spelling of the
// loopback host.
func TestNewRejectsOneServerTwice(t *testing.T) {
	cases := [][]string{
		{"redis://127.0.0.1:7001/0", "redis://127.0.0.1:7002", "redis://127.0.0.1:7001/1"},
		{"redis://localhost:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7001"},
		{"redis://[::1]:7001", "redis://127.0.0.1:7002", "redis://localhost:7001"},
		{"redis://Redis-A.example:7001", "redis://b.example:7001", "redis://redis-a.example:7001/2"},
		{"redis://a.example", "redis://b.example", "redis://a.example:6379"},
	}
	for _, urls := range cases {
		c, err := NewFromURLs(urls)
		if err == nil {
			c.Close()
			t.Errorf("NewFromURLs(%q) accepted one server twice", urls)
			continue
		}
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "same server") {
			t.Errorf("NewFromURLs(%q) = %v, want ErrInvalidArgument: same server", urls, err)
		}
	}
	// Different ports, and loopback addresses other than 127.0.0.1, are
	// different servers.
	c, err := NewFromURLs([]string{"redis://127.0.0.1:7001", "redis://127.0.0.2:7001", "redis://localhost:7002"})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestNewFromURLsRejectsHostlessAndBadPorts(t *testing.T) {
	cases := []struct{ url, want string }{
		{"redis://", "no host"},
		{"redis:///0", "no host"},
		{"redis://:secret@", "no host"},
		{"rediss://:secret@/3", "no host"},
		{"redis://127.0.0.1:99999", "port 99999 is not in 1-65535"},
		{"redis://127.0.0.1:0", "port 0 is not in 1-65535"},
		{"redis://user:secret@127.0.0.1:70000", "port 70000"},
		{"redis://:secret@127.0.0.1:port", "invalid port"},
		{"unix://", "no socket path"},
		{"http://127.0.0.1:6379", "scheme"},
	}
	for _, tc := range cases {
		_, err := NewFromURLs([]string{"redis://127.0.0.1:7001", tc.url, "redis://127.0.0.1:7003"})
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "node 1: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewFromURLs(%q) = %v, want ErrInvalidArgument for node 1 mentioning %q", tc.url, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("error shows the password: %v", err)
		}
	}
}

// A nil handle, from a failed TryLock whose error was ignored, never panics.
func TestNilLock(t *testing.T) {
	var l *Lock
	ctx := context.Background()
	if err := l.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Release = %v, want ErrNotHeld", err)
	}
	if err := l.Extend(ctx, time.Second); !errors.Is(err, ErrNotHeld) {
		t.Errorf("Extend = %v, want ErrNotHeld", err)
	}
	if l.Key() != "" || l.Keys() != nil || l.Owner() != "" || l.TTL() != 0 || !l.Deadline().IsZero() || l.Remaining() != 0 || l.Votes() != nil {
		t.Error("accessors of a nil lock return non-zero values")
	}
}

func TestWithName(t *testing.T) {
	for _, bad := range []string{"a b", "pod:7", "tab\t", strings.Repeat("x", 65), "nl\n"} {
		if _, err := New(unreachable(1), WithName(bad)); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("WithName(%q) = %v, want ErrInvalidArgument", bad, err)
		}
	}
	c, err := New(unreachable(1), WithName("host-1/pod-7"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c2, err := New(unreachable(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if !strings.HasPrefix(c.ID(), "host-1/pod-7/") || len(c.ID()) != len("host-1/pod-7/")+36 || len(c2.ID()) != 36 || c2.ID() == c.ID()[len("host-1/pod-7/"):] {
		t.Fatalf("ids %q and %q: want name/UUID and a UUID of its own", c.ID(), c2.ID())
	}
}

func TestSplitOwner(t *testing.T) {
	for _, tc := range []struct{ v, client, attempt string }{
		{"pod/6f1c2e6a-0d4b-4a57-9e0b-3b1f6c1d2e3f:AAAAAAAAAAAAAAAAAAAAAA", "pod/6f1c2e6a-0d4b-4a57-9e0b-3b1f6c1d2e3f", "AAAAAAAAAAAAAAAAAAAAAA"},
		{"AAAAAAAAAAAAAAAAAAAAAA", "", "AAAAAAAAAAAAAAAAAAAAAA"},
	} {
		if c, a := splitOwner(tc.v); c != tc.client || a != tc.attempt {
			t.Errorf("splitOwner(%q) = %q, %q", tc.v, c, a)
		}
	}
}

// NewFromURLs gives rediss:// nodes a dialer that ends the TLS handshake
// with the call's ctx: go-redis's own ignores it and would hold a call to a
// node that accepts but never answers for the whole dial timeout (here an
// hour, so a dialer that ignored the ctx would hang the test).
func TestTLSDialEndsWithCtx(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan struct{})
	defer func() { ln.Close(); <-accepted }()
	go func() {
		defer close(accepted)
		var conns []net.Conn
		for {
			c, err := ln.Accept() // and never answer the handshake
			if err != nil {
				for _, c := range conns {
					c.Close()
				}
				return
			}
			conns = append(conns, c)
		}
	}()
	c, err := NewFromURLs([]string{"rediss://" + ln.Addr().String() + "?dial_timeout=1h"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dial := c.owned[0].(*redis.Client).Options().Dialer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := dial(ctx, "tcp", ln.Addr().String()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dial = %v, want the ctx's deadline", err)
	}
}

// A zero TTL is refused before any traffic (the watchdog mode has its own
// TTL, Watchdog), and zero option values keep the defaults while the named
// constants turn features off.
func TestZeroMeansDefault(t *testing.T) {
	c, err := New(unreachable(3), WithNodeTimeout(0), WithDrift(Drift{Factor: 0}), WithRetryBackoff(0, 0), WithMaxHold(0),
		WithWatchdog(0, 0), WithLocalHandoff(0, 0), WithRestartQuarantine(0), WithMaxAttempts(0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if d := defaults(); c.o.nodeTimeout != d.nodeTimeout || c.o.driftFactor != d.driftFactor || c.o.retryMin != d.retryMin ||
		c.o.retryMax != d.retryMax || c.o.lease != d.lease || c.o.renewEvery != d.renewEvery || c.o.localHandoff != d.localHandoff ||
		c.o.qWindow != d.qWindow || c.q == nil {
		t.Errorf("zero options changed the defaults: %+v", c.o)
	}
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"Lock":    func() error { _, err := c.Lock(ctx, "k", 0); return err },
		"TryLock": func() error { _, err := c.TryLock(ctx, "k", 0); return err },
		"LockKeys": func() error {
			_, err := c.LockKeys(ctx, []string{"a", "b"}, 0)
			return err
		},
	} {
		if err := call(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s with ttl 0 = %v, want ErrInvalidArgument", name, err)
		}
	}
	off, err := New(unreachable(3), WithLocalHandoff(LocalHandoffOff, 0), WithRestartQuarantine(QuarantineOff), WithoutCoalescing())
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	if off.q != nil || off.o.localHandoff >= 0 || off.o.coalesce {
		t.Errorf("off constants not applied: quarantine %v, hand-off %d, coalescing %v", off.q != nil, off.o.localHandoff, off.o.coalesce)
	}
	for _, o := range []Option{WithLocalHandoff(-2, 0), WithRestartQuarantine(-2 * time.Second), WithNodeTimeout(-time.Second), WithMaxHold(-time.Second)} {
		if c, err := New(unreachable(3), o); !errors.Is(err, ErrInvalidArgument) {
			if c != nil {
				c.Close()
			}
			t.Errorf("negative option accepted: %v", err)
		}
	}
}

// NewFromURLs dials once per attempt on go-redis versions that retry dials
// (DialerRetries).
func TestNewFromURLsDialsOnce(t *testing.T) {
	c, err := NewFromURLs([]string{"redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003/0"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i, want := range []int64{1, 1, 1} {
		f := reflect.ValueOf(c.owned[i].(*redis.Client).Options()).Elem().FieldByName("DialerRetries")
		if !f.IsValid() {
			t.Skip("this go-redis has no DialerRetries")
		}
		if f.Int() != want {
			t.Errorf("node %d: DialerRetries %d, want %d", i, f.Int(), want)
		}
	}
}

// A TTL over MaxTTL, a key over maxKeyLen and a lease over MaxTTL are
// refused before any traffic (the nodes are unreachable: a call that sent
// would fail with ErrNotObtained instead), and the message stays short.
func TestBoundsRefusedBeforeTraffic(t *testing.T) {
	c, err := New(unreachable(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	huge := strings.Repeat("k", 10*maxKeyLen)
	cases := []struct {
		name string
		call func() error
		want string
	}{
		{"ttl over MaxTTL", func() error { _, err := c.TryLock(ctx, "k", MaxTTL+time.Millisecond); return err }, "longer than MaxTTL"},
		{"100 years", func() error { _, err := c.TryLock(ctx, "k", 100*365*24*time.Hour); return err }, "longer than MaxTTL"},
		{"key over maxKeyLen", func() error { _, err := c.TryLock(ctx, huge, time.Second); return err }, "at most 1024 are accepted"},
		{"one long key of many", func() error { _, err := c.TryLockKeys(ctx, []string{"a", huge}, time.Second); return err }, "at most 1024 are accepted"},
	}
	for _, tc := range cases {
		err := tc.call()
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalidArgument: %s", tc.name, err, tc.want)
		}
		if err != nil && len(err.Error()) > 300 {
			t.Errorf("%s: message of %d bytes", tc.name, len(err.Error()))
		}
	}
	if _, err := New(unreachable(3), WithWatchdog(MaxTTL+time.Second, 0)); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("lease over MaxTTL: %v, want ErrInvalidArgument", err)
	}
	// At the bounds: accepted (and so sent: the nodes are unreachable).
	if _, err := c.TryLock(ctx, strings.Repeat("k", maxKeyLen), MaxTTL); errors.Is(err, ErrInvalidArgument) {
		t.Errorf("at the bounds: %v", err)
	}
}

func TestQuoteKeysBounded(t *testing.T) {
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = strings.Repeat("x", 500)
	}
	if s := quoteKeys(keys); len(s) > 8*80+40 {
		t.Errorf("quoteKeys of 100 long keys: %d bytes", len(s))
	}
	if s := quoteKeys([]string{"a", "b"}); s != `["a" "b"]` {
		t.Errorf("quoteKeys = %s", s)
	}
}

// A Lock on nodes that refuse connections does not wait in silence: after
// about a second it logs, at Warn, that too few nodes can vote, naming
// each node and its error.
func TestLockOnDeadNodesSaysSo(t *testing.T) {
	var buf syncBuffer
	lg := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := NewFromURLs([]string{"redis://127.0.0.1:1", "redis://127.0.0.1:2", "redis://127.0.0.1:3"}, WithLogger(lg))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := c.Lock(ctx, "k", time.Second); !errors.Is(err, ErrNotObtained) {
		t.Fatalf("Lock on dead nodes: %v", err)
	}
	out := buf.String()
	if !strings.Contains(out, "too few nodes can vote") || !strings.Contains(out, "127.0.0.1:1") || !strings.Contains(out, "refused") {
		t.Fatalf("no warning naming the nodes and the cause; log:\n%s", out)
	}
	if n := strings.Count(out, "too few nodes can vote"); n != 1 {
		t.Fatalf("%d warnings in 3 s, want 1 (then one every %v)", n, downEvery)
	}
}

// Durable votes on a cluster or ring node are refused at New, before any
// traffic: WAITAOF, keyless, would not follow the command on its shard.
func TestNewRefusesDurableOnClusterAndRing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	addr := ln.Addr().String()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}})
	defer cc.Close()
	rg := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": addr}, HeartbeatFrequency: time.Hour})
	defer rg.Close()
	for _, cl := range []redis.UniversalClient{cc, rg} {
		nodes := append(unreachable(2), cl)
		_, err := New(nodes, WithDurableVotes())
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "node 2: durable votes need standalone or Sentinel-failover nodes") ||
			!strings.Contains(err.Error(), "WAITAOF") {
			t.Errorf("New with durable votes and a %T: %v, want ErrInvalidArgument naming node 2 and why", cl, err)
		}
		c, err := New(nodes) // without durable votes: accepted
		if err != nil {
			t.Fatalf("New with a %T: %v", cl, err)
		}
		c.Close()
	}
	time.Sleep(50 * time.Millisecond)
	if k := len(accepted); k != 0 {
		t.Errorf("%d connections to the cluster/ring node, want none", k)
	}
}
