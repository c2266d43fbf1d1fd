package handoff

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/transport"
)

// never is a wait that only a wake-up can end within a test: the tests
// below never depend on it elapsing.
const never = time.Hour

// hang bounds what must happen promptly: reaching it means a hang.
const hang = time.Minute

func local(t *testing.T) *Hub {
	t.Helper()
	h, err := New(nil, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

type result struct {
	woken bool
	err   error
}

// waitAsync runs t.Wait on its own goroutine.
func waitAsync(ctx context.Context, t *Turn, d time.Duration) <-chan result {
	ch := make(chan result, 1)
	go func() {
		w, err := t.Wait(ctx, d)
		ch <- result{w, err}
	}()
	return ch
}

func get(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(hang):
		t.Fatal("Wait did not return")
		return result{}
	}
}

// blocked asserts that ch has no result now.
func blocked(t *testing.T, ch <-chan result, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s returned %+v; want it still waiting", what, r)
	default:
	}
}

func TestChannel(t *testing.T) {
	if got := Channel("stock:42"); got != "redlock:released:stock:42" {
		t.Fatalf("Channel = %q", got)
	}
}

func TestNewChecksInput(t *testing.T) {
	for name, tc := range map[string]struct {
		clients []redis.UniversalClient
		cfg     Config
	}{
		"nil client":       {[]redis.UniversalClient{nil}, Config{}},
		"typed nil client": {[]redis.UniversalClient{(*redis.Client)(nil)}, Config{}},
		"negative timeout": {nil, Config{SubscribeTimeout: -1}},
		"negative check":   {nil, Config{HealthCheck: -1}},
	} {
		if _, err := New(tc.clients, tc.cfg); err == nil || !strings.HasPrefix(err.Error(), "redlock: ") {
			t.Errorf("%s: err = %v; want a redlock: error", name, err)
		}
	}
}

// A cluster client (and a Ring) gets no subscription: no connection, no
// goroutine; its waiters are polled by their timer.
func TestClusterClientIsPolledOnly(t *testing.T) {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"cluster:1"}})
	defer cc.Close()
	rg := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "ring:1"}})
	defer rg.Close()
	h, err := New([]redis.UniversalClient{cc, rg}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if n := h.Stats().Nodes; n != 0 {
		t.Fatalf("Nodes = %d; want 0", n)
	}
	tn := h.EnterWant("k", nil)
	defer tn.Leave()
	if w, err := tn.Wait(context.Background(), time.Millisecond); w || err != nil {
		t.Fatalf("Wait = %v, %v; want the timer", w, err)
	}
	if n := goroutines(); n != 0 {
		t.Fatalf("%d goroutines of the package run; want none", n)
	}
}

// Only the head returns from Wait: the waiters get their turn in the
// order they entered, each promoted head woken at once by Leave.
func TestFIFO(t *testing.T) {
	h := local(t)
	ctx := context.Background()
	const n = 6
	turns := make([]*Turn, n)
	for i := range turns {
		turns[i] = h.EnterWant("k", nil)
	}
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := n - 1; i >= 0; i-- { // started in reverse: the order comes from the queue
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			w, err := turns[i].Wait(ctx, 0)
			if err != nil || w != (i > 0) {
				t.Errorf("waiter %d: Wait = %v, %v; want woken %v", i, w, err, i > 0)
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			turns[i].Leave()
		}(i)
	}
	wg.Wait()
	for i, v := range order {
		if v != i {
			t.Fatalf("order %v; want 0..%d", order, n-1)
		}
	}
	if s := h.Stats(); s.Promoted != n-1 || s.Timer != 0 || s.Notified != 0 || s.Local != 0 {
		t.Fatalf("stats %+v; want %d promotions only", s, n-1)
	}
	if len(h.keys) != 0 {
		t.Fatalf("queues left: %v", h.keys)
	}
}

// A wake-up goes to the head only; the waiters behind it stay put.
func TestOnlyHeadIsWoken(t *testing.T) {
	h := local(t)
	head, second := h.EnterWant("k", nil), h.EnterWant("k", nil)
	defer head.Leave()
	defer second.Leave()
	ctx, cancel := context.WithCancel(context.Background())
	behind := waitAsync(ctx, second, never)
	first := waitAsync(context.Background(), head, never)
	h.ReleasedOwner("k", "")
	if r := get(t, first); !r.woken || r.err != nil {
		t.Fatalf("head: %+v; want woken", r)
	}
	h.notify(transport.Event{Kind: transport.Message, Channel: Channel("k")})
	h.ReleasedOwner("other", "") // no waiters: nothing happens
	blocked(t, behind, "second waiter")
	cancel()
	if r := get(t, behind); r.woken || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("second: %+v; want only ctx's error", r)
	}
	// The notification came while the head was not waiting: pending.
	if w, err := head.Wait(context.Background(), never); !w || err != nil {
		t.Fatalf("head's next Wait = %v, %v; want the pending wake-up", w, err)
	}
	if s := h.Stats(); s.Local != 1 || s.Notified != 1 || s.Messages != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// A wake-up that arrives between two Waits (the head was trying) is
// consumed by the next Wait at once, and only once.
func TestPendingWake(t *testing.T) {
	h := local(t)
	tn := h.EnterWant("k", nil)
	defer tn.Leave()
	h.ReleasedOwner("k", "")
	h.ReleasedOwner("k", "") // coalesces with the first
	if w, err := tn.Wait(context.Background(), never); !w || err != nil {
		t.Fatalf("Wait = %v, %v; want the pending wake-up", w, err)
	}
	if w, err := tn.Wait(context.Background(), time.Millisecond); w || err != nil {
		t.Fatalf("second Wait = %v, %v; want the timer (the wake-up was consumed)", w, err)
	}
	// d <= 0 never waits for a notification, and consumes a pending one.
	if w, err := tn.Wait(context.Background(), 0); w || err != nil {
		t.Fatalf("Wait(0) = %v, %v; want false at once", w, err)
	}
	h.notify(transport.Event{Kind: transport.Message, Channel: Channel("k")})
	if w, err := tn.Wait(context.Background(), 0); !w || err != nil {
		t.Fatalf("Wait(0) = %v, %v; want the pending notification", w, err)
	}
	if s := h.Stats(); s.Local != 1 || s.Notified != 1 || s.Timer != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// The head blocked in Wait is woken by a notification while it waits.
func TestNotificationWakesWaitingHead(t *testing.T) {
	h := local(t)
	tn := h.EnterWant("k", nil)
	defer tn.Leave()
	ch := waitAsync(context.Background(), tn, never)
	for !h.waiting(tn) {
		runtime.Gosched()
	}
	h.notify(transport.Event{Kind: transport.Message, Channel: Channel("k"), Payload: "owner-1"})
	if r := get(t, ch); !r.woken || r.err != nil {
		t.Fatalf("Wait: %+v; want woken", r)
	}
	if s := h.Stats(); s.Notified != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// waiting reports whether tn is blocked in Wait.
func (h *Hub) waiting(tn *Turn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return tn.waiting
}

// The same release seen on several nodes (same payload), or already
// announced locally by ReleasedOwner, wakes the head once.
func TestDuplicateNotificationsAreDropped(t *testing.T) {
	h := local(t)
	tn := h.EnterWant("k", nil)
	defer tn.Leave()
	for i := 0; i < 3; i++ { // one release, three nodes
		h.notify(transport.Event{Kind: transport.Message, Channel: Channel("k"), Payload: "owner-A"})
	}
	if w, _ := tn.Wait(context.Background(), 0); !w {
		t.Fatal("not woken")
	}
	if w, _ := tn.Wait(context.Background(), 0); w {
		t.Fatal("woken twice by one release")
	}
	h.ReleasedOwner("k", "owner-B")
	h.notify(transport.Event{Kind: transport.Message, Channel: Channel("k"), Payload: "owner-B"})
	if w, _ := tn.Wait(context.Background(), 0); !w {
		t.Fatal("not woken by ReleasedOwner")
	}
	if w, _ := tn.Wait(context.Background(), 0); w {
		t.Fatal("the nodes' notification of a local release woke the head again")
	}
	h.notify(transport.Event{Kind: transport.Message, Channel: Channel("k")}) // no payload: never a duplicate
	h.notify(transport.Event{Kind: transport.Message, Channel: "other:k"})    // not ours
	if w, _ := tn.Wait(context.Background(), 0); !w {
		t.Fatal("not woken by a notification without payload")
	}
	if s := h.Stats(); s.Duplicates != 3 || s.Messages != 6 || s.Notified != 2 || s.Local != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// Leave of the head promotes the next waiter and wakes it at once, even
// while it blocks as a non-head; Leave of a middle waiter wakes nobody.
func TestLeavePromotes(t *testing.T) {
	h := local(t)
	a, b, c := h.EnterWant("k", nil), h.EnterWant("k", nil), h.EnterWant("k", nil)
	defer c.Leave()
	rb := waitAsync(context.Background(), b, never)
	a.Leave()
	a.Leave() // idempotent
	if r := get(t, rb); !r.woken || r.err != nil {
		t.Fatalf("b: %+v; want woken as the new head", r)
	}
	rc := waitAsync(context.Background(), c, never)
	d := h.EnterWant("k", nil)
	d.Leave() // a waiter behind c leaves: c is not woken
	if w, err := b.Wait(context.Background(), 0); w || err != nil {
		t.Fatalf("b's Wait(0) = %v, %v; want nothing pending", w, err)
	}
	blocked(t, rc, "c")
	b.Leave()
	if r := get(t, rc); !r.woken || r.err != nil {
		t.Fatalf("c: %+v; want woken as the new head", r)
	}
	if _, err := a.Wait(context.Background(), 0); !errors.Is(err, ErrLeft) {
		t.Fatalf("Wait after Leave: %v; want ErrLeft", err)
	}
	if s := h.Stats(); s.Promoted != 2 {
		t.Fatalf("stats %+v", s)
	}
}

// A waiter made head by LeaveHolding (this process holds the lock) is not
// woken, and whatever its d it waits (trying would only find the lock
// held here) until this process's release wakes it.
func TestLeaveHoldingDoesNotWake(t *testing.T) {
	h := local(t)
	a, b := h.EnterWant("k", nil), h.EnterWant("k", nil)
	defer b.Leave()
	a.LeaveHolding()
	rb := waitAsync(context.Background(), b, 0)
	for !h.waiting(b) {
		runtime.Gosched()
	}
	blocked(t, rb, "b")
	h.ReleasedOwner("k", "")
	if r := get(t, rb); !r.woken || r.err != nil {
		t.Fatalf("b: %+v; want woken by the release", r)
	}
	if s := h.Stats(); s.Promoted != 0 || s.Local != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// A head made head by LeaveHolding waits, its timer stopped, while this
// process holds the lock; once this process gives the lock up without
// handing it on (Unheld: released to the nodes after its last local pass,
// or lost) its timer runs: with nothing announcing the release (no
// subscription) it ends its wait on its own and polls.
func TestUnheldStartsTimer(t *testing.T) {
	h := local(t)
	a, b := h.EnterWant("k", nil), h.EnterWant("k", nil)
	defer b.Leave()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // ends a Wait that nothing ends
	defer cancel()
	rb := waitAsync(ctx, b, 10*time.Millisecond)
	for !h.waiting(b) {
		runtime.Gosched()
	}
	a.LeaveHolding()
	time.Sleep(30 * time.Millisecond) // three of b's timers: none may run while the lock is held here
	blocked(t, rb, "b")
	h.Unheld("k", false)
	if r := get(t, rb); r.woken || r.err != nil {
		t.Fatalf("b: woken %v, %v; want its wait ended by its timer", r.woken, r.err)
	}
	if s := h.Stats(); s.Timer != 1 || s.Promoted != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// A head made head by LeaveHolding, whose lock was then deleted on the
// nodes (Unheld, released), waits for the nodes' announcement, but not
// for ever: a node whose subscription was being renewed misses it, and a
// holder of another library, who may take the key meanwhile, announces
// nothing. After announceWait it ends its wait and tries.
func TestUnheldAnnouncementMissed(t *testing.T) {
	cl := redis.NewClient(&redis.Options{Addr: "node:1", MaxRetries: -1,
		Dialer: func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("unit tests dial nothing")
		}})
	defer cl.Close()
	h, err := New([]redis.UniversalClient{cl}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	a, b := h.EnterWant("k", nil), h.EnterWant("k", nil)
	defer b.Leave()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // ends a Wait that nothing ends
	defer cancel()
	a.LeaveHolding()
	rb := waitAsync(ctx, b, 0)
	for !h.waiting(b) {
		runtime.Gosched()
	}
	start := time.Now()
	h.Unheld("k", true)
	time.Sleep(announceWait / 4)
	blocked(t, rb, "b before announceWait") // the announcement may still come
	if r := get(t, rb); r.woken || r.err != nil {
		t.Fatalf("b: woken %v, %v; want its wait ended without a wake-up", r.woken, r.err)
	}
	if d := time.Since(start); d < announceWait || d > announceWait+time.Second {
		t.Fatalf("b waited %v after Unheld, want about %v", d, announceWait)
	}
}

// Leave from another goroutine ends a Wait in progress on the same Turn.
func TestLeaveEndsWait(t *testing.T) {
	h := local(t)
	head, tn := h.EnterWant("k", nil), h.EnterWant("k", nil)
	defer head.Leave()
	r := waitAsync(context.Background(), tn, never)
	tn.Leave()
	if r := get(t, r); r.woken || !errors.Is(r.err, ErrLeft) {
		t.Fatalf("%+v; want ErrLeft", r)
	}
}

// A waiter whose ctx ends returns ctx's error and changes nothing else: it
// keeps its place, the others theirs, and a wake-up is not consumed.
func TestCancelRemovesNothing(t *testing.T) {
	h := local(t)
	a, b, c := h.EnterWant("k", nil), h.EnterWant("k", nil), h.EnterWant("k", nil)
	defer c.Leave()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if w, err := b.Wait(done, never); w || !errors.Is(err, context.Canceled) {
		t.Fatalf("b: %v, %v; want ctx's error", w, err)
	}
	h.ReleasedOwner("k", "")
	if w, err := a.Wait(done, never); w || !errors.Is(err, context.Canceled) {
		t.Fatalf("head with a done ctx: %v, %v; want ctx's error", w, err)
	}
	if w, err := a.Wait(context.Background(), never); !w || err != nil {
		t.Fatalf("head: %v, %v; want the wake-up kept pending", w, err)
	}
	rc := waitAsync(context.Background(), c, never)
	a.Leave()
	if w, err := b.Wait(context.Background(), never); !w || err != nil {
		t.Fatalf("b: %v, %v; want it head after a, woken", w, err)
	}
	blocked(t, rc, "c")
	b.Leave()
	if r := get(t, rc); !r.woken || r.err != nil {
		t.Fatalf("c: %+v", r)
	}
}

// The timer ends the wait of a head when no wake-up comes.
func TestTimerFallback(t *testing.T) {
	h := local(t)
	tn := h.EnterWant("k", nil)
	defer tn.Leave()
	if w, err := tn.Wait(context.Background(), time.Millisecond); w || err != nil {
		t.Fatalf("Wait = %v, %v; want the timer", w, err)
	}
	if s := h.Stats(); s.Timer != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// Close ends every Wait, head or not, with ErrClosed; later calls are
// harmless.
func TestCloseEndsWaits(t *testing.T) {
	h, err := New(nil, Config{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := h.EnterWant("k", nil), h.EnterWant("k", nil)
	ra := waitAsync(context.Background(), a, never)
	rb := waitAsync(context.Background(), b, never)
	h.Close()
	h.Close()
	for _, r := range []result{get(t, ra), get(t, rb)} {
		if r.woken || !errors.Is(r.err, ErrClosed) {
			t.Fatalf("%+v; want ErrClosed", r)
		}
	}
	late := h.EnterWant("k", nil)
	if _, err := late.Wait(context.Background(), never); !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait after Close: %v", err)
	}
	h.ReleasedOwner("k", "")
	a.Leave()
	b.Leave()
	late.Leave()
}

// A node that cannot be reached (every dial fails; no network is used):
// waiters end by their timer, the failures are counted, Enter and Leave
// do not wait for the node, and Close ends the node's goroutines.
func TestUnreachableNode(t *testing.T) {
	cl := redis.NewClient(&redis.Options{Addr: "node:1", MaxRetries: -1,
		Dialer: func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("unit tests dial nothing")
		}})
	defer cl.Close()
	h, err := New([]redis.UniversalClient{cl}, Config{HealthCheck: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	tn := h.EnterWant("k", nil)
	if w, err := tn.Wait(context.Background(), time.Millisecond); w || err != nil {
		t.Fatalf("Wait = %v, %v; want the timer", w, err)
	}
	tn.Leave()
	for deadline := time.Now().Add(hang); ; {
		if s := h.Stats(); s.ReceiveErrors > 0 && s.SubscribeErrors > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("failures not counted: %+v", h.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	if s := h.Stats(); s.Nodes != 1 || s.Reconnects != 0 {
		t.Fatalf("stats %+v", s)
	}
	h.Close()
	for deadline := time.Now().Add(hang); goroutines() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines of the package still run after Close", goroutines())
		}
		time.Sleep(time.Millisecond)
	}
}

// goroutines counts the goroutines running this package's code.
func goroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return strings.Count(string(buf), "redlock/handoff.(*sub)")
}
