package redlock

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock/clock"
	"github.com/redlock-go/redlock/internal/lockstate"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/observe"
)

// phaseWalk is a Client on the fake clock whose Locks report every phase
// transition; its nodes are never reached (nothing here sends).
type phaseWalk struct {
	t    *testing.T
	fc   *clock.Fake
	c    *Client
	mu   sync.Mutex
	seen map[lockstate.Row]int
}

func newPhaseWalk(t *testing.T, opts ...Option) *phaseWalk {
	w := &phaseWalk{t: t, fc: clock.NewFake(time.Unix(100, 0)), seen: map[lockstate.Row]int{}}
	nodes := unreachable(3)
	c, err := New(nodes, append([]Option{WithClock(w.fc), WithRestartQuarantine(QuarantineOff)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		done := make(chan struct{})
		go func() { defer close(done); c.Close() }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("Close did not return: a call never left the Client")
		}
		for _, n := range nodes {
			n.Close()
		}
	})
	c.o.onPhase = func(from lockstate.Phase, on lockstate.Event, to lockstate.Phase) {
		w.mu.Lock()
		w.seen[lockstate.Row{From: from, On: on, To: to}]++
		w.mu.Unlock()
	}
	w.c = c
	return w
}

// lock is a held Lock of one key with ttl, as an acquisition leaves it.
func (w *phaseWalk) lock(ttl time.Duration) *Lock {
	now := w.fc.Now()
	return &Lock{c: w.c, typ: plain{}, keys: []string{"k"}, name: "k", owner: "id:r", ttl: ttl, acquired: now,
		deadline: now.Add(validity(ttl, 0, w.c.o.driftFactor)), confirmed: true}
}

// yes is a round that reached the quorum.
func (w *phaseWalk) yes() quorum.Outcome {
	return quorum.Outcome{Reached: true, Yes: 3, Votes: []quorum.Vote{{OK: true, Done: true}, {OK: true, Done: true}, {OK: true, Done: true}}}
}

func (w *phaseWalk) phase(l *Lock) lockstate.Phase {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.phase
}

func (w *phaseWalk) want(l *Lock, p lockstate.Phase, after string) {
	w.t.Helper()
	if got := w.phase(l); got != p {
		w.t.Fatalf("after %s: phase %v, want %v", after, got, p)
	}
}

// Every row of the phase table is taken by a Lock driven through its
// transitions on the fake clock, and each lands where the table says, with
// the effect the user sees (deadline, Done, Err).
func TestLockPhaseTableWalk(t *testing.T) {
	w := newPhaseWalk(t)
	ctx := context.Background()
	ttl := time.Second

	// held -extend-> extending -settle-> held: the deadline moves.
	l := w.lock(ttl)
	w.fc.Advance(100 * time.Millisecond)
	start := w.fc.Now()
	if ok, _ := l.beginRenewal(ctx, start, ttl); !ok {
		t.Fatal("renewal not started")
	}
	w.want(l, lockstate.Extending, "a renewal began")
	l.settle(ctx, opRenew, start, start, ttl, w.yes())
	w.want(l, lockstate.Held, "it settled")
	if got, want := l.Deadline(), start.Add(validity(ttl, 0, w.c.o.driftFactor)); !got.Equal(want) {
		t.Fatalf("deadline %v, want %v", got, want)
	}

	// extending -hand-on-> extending: a queued Extend takes the turn.
	l.beginRenewal(ctx, w.fc.Now(), ttl)
	second := make(chan error, 1)
	go func() {
		s, _, err := l.beginExtend(ctx, w.fc.Now(), ttl)
		if err == nil {
			l.settle(ctx, opExtend, w.fc.Now(), s, ttl, w.yes())
		}
		second <- err
	}()
	for { // the Extend queues behind the renewal
		l.mu.Lock()
		n := l.queueLen()
		l.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	l.settle(ctx, opRenew, w.fc.Now(), w.fc.Now(), ttl, w.yes())
	if err := <-second; err != nil {
		t.Fatalf("queued Extend: %v", err)
	}
	w.want(l, lockstate.Held, "the queued Extend settled")

	// held -release-> releasing -end-> ended: Done closes, Err says released.
	_, _, _, lost, next := l.beginRelease(false)
	if lost != nil || next != nil || !errors.Is(l.Err(), ErrReleased) {
		t.Fatalf("release: lost %v, next %v, Err %v", lost, next, l.Err())
	}
	<-l.Done()
	w.want(l, lockstate.Ended, "Release")

	// extending -release-> releasing -settle-> releasing: Release waits
	// for the extension in flight.
	l = w.lock(ttl)
	l.beginRenewal(ctx, w.fc.Now(), ttl)
	released := make(chan struct{})
	go func() { l.beginRelease(false); close(released) }()
	for w.phase(l) != lockstate.Releasing {
		time.Sleep(time.Millisecond)
	}
	select {
	case <-released:
		t.Fatal("Release did not wait for the extension in flight")
	case <-time.After(20 * time.Millisecond):
	}
	l.settle(ctx, opRenew, w.fc.Now(), w.fc.Now(), ttl, w.yes())
	<-released
	w.want(l, lockstate.Ended, "Release after the extension")

	// held -end-> ended at the deadline.
	l = w.lock(ttl)
	w.fc.Advance(ttl)
	if err := l.Err(); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Err past the deadline: %v", err)
	}
	w.want(l, lockstate.Ended, "the deadline")

	// extending -end-> ended, then a late settle leaves it ended.
	l = w.lock(ttl)
	l.beginRenewal(ctx, w.fc.Now(), ttl)
	w.fc.Advance(ttl)
	_ = l.Err()
	w.want(l, lockstate.Ended, "the deadline during an extension")
	l.settle(ctx, opRenew, w.fc.Now(), w.fc.Now(), ttl, w.yes())
	w.want(l, lockstate.Ended, "a late settle")
	if l.Remaining() != 0 {
		t.Fatal("a late settle revived a lost Lock")
	}

	// ended -pass-> passed: the hold goes to a successor.
	l = w.lock(ttl)
	_, _, _, _, next = l.beginRelease(true)
	if next == nil {
		t.Fatal("no successor for a confirmed Lock with validity to spare")
	}
	l.markPassed()
	w.want(l, lockstate.Passed, "the hand-on")
	if next.Deadline() != l.Deadline() || next.Owner() != l.Owner() {
		t.Fatal("the successor does not carry the hold")
	}

	for _, r := range lockstate.Rows() {
		if w.seen[lockstate.Row{From: r.From, On: r.On, To: r.To}] == 0 {
			t.Errorf("row %v -%v-> %v never taken", r.From, r.On, r.To)
		}
	}
}

// A transition the table does not list (a bug) ends that Lock as lost
// with a *phaseError naming the phase and the event, logged at error
// level and reported, instead of panicking: also on a timer goroutine,
// where a panic would end the process. The Client's other Locks go on.
func TestLockPhaseOffTableEndsTheLock(t *testing.T) {
	var log syncBuffer
	lost := make(chan observe.Event, 4)
	w := newPhaseWalk(t, WithLogger(slog.New(slog.NewTextHandler(&log, nil))),
		WithObserver(func(e observe.Event) {
			if e.Op == observe.OpLost {
				lost <- e
			}
		}))
	ctx, ttl := context.Background(), time.Second
	other := w.lock(10 * ttl)

	// The expiry timer meets a Lock whose phase went wrong (passed, yet
	// not ended): its end is off the table.
	l := w.lock(ttl)
	done := l.Done() // arms the expiry timer
	l.mu.Lock()
	l.phase = lockstate.Passed
	l.mu.Unlock()
	w.fc.Advance(ttl)
	waitClosed(t, done, "Done after an off-table end on the timer")
	wantPhaseError(t, l.Err(), "passed", "end")
	wantLostEvent(t, lost, l)

	// held -pass-> is no row either.
	l = w.lock(ttl)
	done = l.Done()
	l.mu.Lock()
	l.to(lockstate.Pass)
	l.mu.Unlock()
	waitClosed(t, done, "Done after held -pass->")
	wantPhaseError(t, l.Err(), "held", "pass")
	wantPhaseError(t, context.Cause(l.Context()), "held", "pass")
	w.want(l, lockstate.Ended, "held -pass->")
	wantLostEvent(t, lost, l)
	if _, _, _, lostErr, _ := l.beginRelease(false); !errors.Is(lostErr, ErrInternal) {
		t.Fatalf("Release of the ended Lock: lost %v", lostErr)
	}
	for !strings.Contains(log.String(), `level=ERROR msg="redlock: internal error"`) ||
		!strings.Contains(log.String(), "in phase held has no transition on pass") {
		time.Sleep(time.Millisecond) // reported on another goroutine
	}

	// Without a logger of the Client's, slog.Default gets it.
	var def syncBuffer
	was := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&def, nil)))
	defer slog.SetDefault(was)
	bare := newPhaseWalk(t).lock(ttl)
	bare.mu.Lock()
	bare.to(lockstate.Settle)
	bare.mu.Unlock()
	for !strings.Contains(def.String(), "in phase held has no transition on settle") {
		time.Sleep(time.Millisecond)
	}

	// The Client's other Lock is renewed and released as usual.
	start := w.fc.Now()
	if ok, _ := other.beginRenewal(ctx, start, ttl); !ok {
		t.Fatal("renewal of another Lock not started")
	}
	if _, err := other.settle(ctx, opRenew, start, start, ttl, w.yes()); err != nil || other.Err() != nil {
		t.Fatalf("renewal of another Lock: %v, Err %v", err, other.Err())
	}
	if _, _, _, lostErr, _ := other.beginRelease(false); lostErr != nil || !errors.Is(other.Err(), ErrReleased) {
		t.Fatalf("release of another Lock: lost %v, Err %v", lostErr, other.Err())
	}
}

func wantPhaseError(t *testing.T, err error, phase, event string) {
	t.Helper()
	var pe *phaseError
	if !errors.As(err, &pe) || pe.Phase != phase || pe.Event != event || !errors.Is(err, ErrInternal) || !errors.Is(err, ErrLockLost) {
		t.Fatalf("error %v: want a *phaseError for %s on %s, matching ErrInternal and ErrLockLost", err, phase, event)
	}
	if msg := err.Error(); !strings.HasPrefix(msg, "redlock: ") || !strings.Contains(msg, phase) || !strings.Contains(msg, event) {
		t.Fatalf("message %q does not name the phase and the event", msg)
	}
}

func wantLostEvent(t *testing.T, lost <-chan observe.Event, l *Lock) {
	t.Helper()
	select {
	case e := <-lost:
		if e.Lock != l || !errors.Is(e.Err, ErrInternal) {
			t.Fatalf("lost event %+v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no lost event")
	}
}

func waitClosed(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: not closed", what)
	}
}

// within fails t unless f returns within a few seconds (a call that
// waits on a mutex left locked never does).
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	waitClosed(t, done, what)
}

// recovered runs f, which must panic, and recovers the panic, as a
// net/http handler's server does.
func recovered(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	f()
}

// A panic out of a callback that a Lock calls under its mutex (here the
// phase hook), recovered by the caller, leaves nothing locked: the same
// Lock and the Client go on, and Close returns.
func TestRecoveredPanicLeavesNothingLocked(t *testing.T) {
	w := newPhaseWalk(t)
	var boom atomic.Int32 // 1 + the event on which the hook panics, once
	w.c.o.onPhase = func(_ lockstate.Phase, on lockstate.Event, _ lockstate.Phase) {
		if boom.CompareAndSwap(int32(on)+1, 0) {
			panic("hook")
		}
	}
	ctx, ttl := context.Background(), time.Second

	// Release: the hook panics as the Lock moves to releasing.
	l := w.lock(ttl)
	boom.Store(int32(lockstate.Release) + 1)
	recovered(t, func() { l.Release(ctx) })
	within(t, "Deadline after a panic in Release", func() { l.Deadline() })

	// Err past the deadline: the hook panics as the Lock ends.
	l = w.lock(ttl)
	w.fc.Advance(ttl)
	boom.Store(int32(lockstate.End) + 1)
	recovered(t, func() { l.Err() })
	within(t, "Err after a panic in Err", func() {
		if err := l.Err(); !errors.Is(err, ErrLockLost) {
			t.Errorf("Err = %v", err)
		}
	})

	// A hand-on: the hook panics as the released Lock passes.
	l = w.lock(ttl)
	if _, _, _, _, next := l.beginRelease(true); next == nil {
		t.Fatal("no successor")
	}
	boom.Store(int32(lockstate.Pass) + 1)
	recovered(t, l.markPassed)
	within(t, "Remaining after a panic in a hand-on", func() { l.Remaining() })

	within(t, "Close", func() { w.c.Close() })
}
