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
// transition, and refuse the one row broken names (a bug, for tests of
// one); its nodes are never reached (nothing here sends).
type phaseWalk struct {
	t      *testing.T
	fc     *clock.Fake
	c      *Client
	mu     sync.Mutex
	seen   map[lockstate.Row]int
	broken atomic.Pointer[lockstate.Row] // From and On of a row to refuse
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
	c.o.phaseTable = func(from lockstate.Phase, on lockstate.Event) (lockstate.Phase, bool) {
		if b := w.broken.Load(); b != nil && b.From == from && b.On == on {
			return from, false
		}
		to, ok := lockstate.Next(from, on)
		if ok {
			w.mu.Lock()
			w.seen[lockstate.Row{From: from, On: on, To: to}]++
			w.mu.Unlock()
		}
		return to, ok
	}
	w.c = c
	return w
}

// lock is a held Lock of one key with ttl, as an acquisition leaves it.
func (w *phaseWalk) lock(ttl time.Duration) *Lock {
	now := w.fc.Now()
	return &Lock{c: w.c, typ: plain{}, keys: []string{"k"}, name: "k", owner: "id:r", ttl: ttl, acquired: now,
		deadline: now.Add(validity(ttl, 0, w.c.o.driftFactor))}
}

// unsure is a held Lock whose last extension fell short of the quorum.
func (w *phaseWalk) unsure(ttl time.Duration) *Lock {
	l := w.lock(ttl)
	w.renew(l)
	w.settle(l, w.short())
	w.want(l, lockstate.HeldUnsure, "an extension short of the quorum")
	return l
}

// yes is a round that reached the quorum.
func (w *phaseWalk) yes() quorum.Outcome {
	return quorum.Outcome{Reached: true, Yes: 3, Votes: []quorum.Vote{{OK: true, Done: true}, {OK: true, Done: true}, {OK: true, Done: true}}}
}

// short is a round that fell short of the quorum, with every node still
// possibly holding the lock: it stays held until its deadline.
func (w *phaseWalk) short() quorum.Outcome {
	return quorum.Outcome{Yes: 1, Votes: []quorum.Vote{{OK: true, Done: true}, {}, {}}}
}

// renew starts a watchdog renewal of l.
func (w *phaseWalk) renew(l *Lock) {
	w.t.Helper()
	if ok, _ := l.beginRenewal(context.Background(), w.fc.Now(), l.TTL()); !ok {
		w.t.Fatalf("renewal not started in phase %v", w.phase(l))
	}
}

// settle settles the extension in flight with out.
func (w *phaseWalk) settle(l *Lock, out quorum.Outcome) error {
	_, err := l.settle(context.Background(), opExtend, w.fc.Now(), w.fc.Now(), l.TTL(), out)
	return err
}

// skip ends the turn of the extension in flight without a round, as
// startLocked does when the turn finds the Lock releasing or lost.
func (w *phaseWalk) skip(l *Lock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.passTurn(lockstate.Skip)
}

// lose runs l past its deadline and lets Err find it lost.
func (w *phaseWalk) lose(l *Lock) {
	w.t.Helper()
	w.fc.Advance(l.TTL())
	if err := l.Err(); !errors.Is(err, ErrLockLost) {
		w.t.Fatalf("Err past the deadline: %v", err)
	}
}

type releaseResult struct {
	again bool
	lost  error
	next  *Lock
}

func (w *phaseWalk) release(l *Lock, handOn bool) releaseResult {
	_, _, again, lost, next := l.beginRelease(handOn)
	return releaseResult{again, lost, next}
}

// releaseWaiting begins a Release of l, which has an extension in flight,
// and returns once it waits for it (and Release's result when it is done).
func (w *phaseWalk) releaseWaiting(l *Lock, handOn bool) <-chan releaseResult {
	ch := make(chan releaseResult, 1)
	go func() { ch <- w.release(l, handOn) }()
	for !w.phase(l).Releasing() {
		time.Sleep(time.Millisecond)
	}
	select {
	case <-ch:
		w.t.Fatal("Release did not wait for the extension in flight")
	case <-time.After(10 * time.Millisecond):
	}
	return ch
}

func (w *phaseWalk) phase(l *Lock) lockstate.Phase {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.life.phase
}

func (w *phaseWalk) want(l *Lock, p lockstate.Phase, after string) {
	w.t.Helper()
	if got := w.phase(l); got != p {
		w.t.Fatalf("after %s: phase %v, want %v", after, got, p)
	}
}

// Every row of the phase table is taken by Locks driven through their
// transitions on the fake clock, and each lands where the table says, with
// the effect the user sees (deadline, Done, Err, the hand-on).
func TestLockPhaseTableWalk(t *testing.T) {
	w := newPhaseWalk(t)
	ttl := time.Second
	walkExtensions(t, w, ttl)
	walkReleases(t, w, ttl)
	walkReleaseWaits(t, w, ttl)
	walkLosses(t, w, ttl)
	for _, r := range lockstate.Rows() {
		if w.seen[lockstate.Row{From: r.From, On: r.On, To: r.To}] == 0 {
			t.Errorf("row %v -%v-> %v never taken", r.From, r.On, r.To)
		}
	}
}

// walkExtensions takes the rows of extensions: confirmed, short of the
// quorum, queued and skipped.
func walkExtensions(t *testing.T, w *phaseWalk, ttl time.Duration) {
	ctx := context.Background()
	l := w.lock(ttl)
	w.fc.Advance(100 * time.Millisecond)
	start := w.fc.Now()
	w.renew(l)
	w.want(l, lockstate.Extending, "a renewal began")
	l.settle(ctx, opRenew, start, start, ttl, w.yes())
	w.want(l, lockstate.Held, "it settled")
	if got, want := l.Deadline(), start.Add(validity(ttl, 0, w.c.o.driftFactor)); !got.Equal(want) {
		t.Fatalf("deadline %v, want %v", got, want)
	}

	// A queued Extend takes the turn as the renewal settles.
	w.renew(l)
	second := make(chan error, 1)
	go func() {
		s, _, err := l.beginExtend(ctx, w.fc.Now(), ttl)
		if err == nil {
			_, err = l.settle(ctx, opExtend, w.fc.Now(), s, ttl, w.yes())
		}
		second <- err
	}()
	for { // the Extend queues behind the renewal
		l.mu.Lock()
		n := l.more.queued()
		l.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	w.settle(l, w.yes())
	if err := <-second; err != nil {
		t.Fatalf("queued Extend: %v", err)
	}
	w.want(l, lockstate.Held, "the queued Extend settled")

	// Short of the quorum: held, unsure, until a round confirms it again.
	l = w.unsure(ttl)
	if err := l.Err(); err != nil {
		t.Fatalf("Err of a held, unsure Lock: %v", err)
	}
	w.renew(l)
	w.want(l, lockstate.ExtendingUnsure, "a renewal of an unsure Lock")
	w.settle(l, w.short())
	w.want(l, lockstate.HeldUnsure, "another short round")
	w.renew(l)
	w.settle(l, w.yes())
	w.want(l, lockstate.Held, "a confirmed round")

	// An Extend whose ctx is done sends nothing: the phase is as before.
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := l.beginExtend(done, w.fc.Now(), ttl); err == nil {
		t.Fatal("Extend with a done ctx started")
	}
	w.want(l, lockstate.Held, "a skipped Extend")
	l = w.unsure(ttl)
	l.beginExtend(done, w.fc.Now(), ttl)
	w.want(l, lockstate.HeldUnsure, "a skipped Extend of an unsure Lock")
}

// walkReleases takes the rows of Release: at once, after the extension in
// flight, again, and the hand-on, which only a confirmed Lock makes.
func walkReleases(t *testing.T, w *phaseWalk, ttl time.Duration) {
	l := w.lock(ttl)
	if r := w.release(l, false); r.lost != nil || r.next != nil || r.again || !errors.Is(l.Err(), ErrReleased) {
		t.Fatalf("release: %+v, Err %v", r, l.Err())
	}
	<-l.Done()
	w.want(l, lockstate.Released, "Release")
	if r := w.release(l, false); !r.again {
		t.Fatal("a second Release was not refused")
	}

	l = w.unsure(ttl)
	if r := w.release(l, true); r.next != nil || r.lost != nil {
		t.Fatalf("release of an unsure Lock: %+v (no hand-on)", r)
	}
	w.want(l, lockstate.Released, "Release of an unsure Lock")
}

// walkReleaseWaits takes the rows of a Release that waits for the
// extension in flight, whose verdict decides the hand-on; a second
// Release meanwhile is refused at once.
func walkReleaseWaits(t *testing.T, w *phaseWalk, ttl time.Duration) {
	l := w.lock(ttl)
	w.renew(l)
	ch := w.releaseWaiting(l, true)
	if r := w.release(l, true); !r.again {
		t.Fatal("a Release during Release was not refused")
	}
	w.settle(l, w.short())
	if r := <-ch; r.next != nil || r.lost != nil {
		t.Fatalf("release after a short round: %+v (no hand-on)", r)
	}
	l = w.unsure(ttl)
	w.renew(l)
	ch = w.releaseWaiting(l, true)
	if r := w.release(l, true); !r.again {
		t.Fatal("a Release during Release was not refused")
	}
	w.settle(l, w.yes())
	r := <-ch
	if r.next == nil {
		t.Fatal("no successor for a Lock confirmed again with validity to spare")
	}
	l.markPassed()
	w.want(l, lockstate.Passed, "the hand-on")
	if r.next.Deadline() != l.Deadline() || r.next.Owner() != l.Owner() {
		t.Fatal("the successor does not carry the hold")
	}
	if r := w.release(l, false); !r.again {
		t.Fatal("Release after the hand-on was not refused")
	}
	for _, end := range []func(*Lock){ // the extension waited for confirms, or sends nothing
		func(l *Lock) { w.settle(l, w.yes()) },
		w.skip,
	} {
		for _, unsure := range []bool{false, true} {
			l = w.lock(ttl)
			if unsure {
				l = w.unsure(ttl)
			}
			w.renew(l)
			ch = w.releaseWaiting(l, false)
			end(l)
			if r := <-ch; r.lost != nil || !errors.Is(l.Err(), ErrReleased) {
				t.Fatalf("release after the extension: %+v", r)
			}
		}
	}
	l = w.unsure(ttl)
	w.renew(l)
	ch = w.releaseWaiting(l, false)
	w.settle(l, w.short())
	<-ch
	w.want(l, lockstate.Released, "Release after another short round")
}

// walkLosses takes the rows of losses: in every live phase, Release of a
// lost Lock, and extensions settling on one.
func walkLosses(t *testing.T, w *phaseWalk, ttl time.Duration) {
	l := w.lock(ttl)
	w.lose(l)
	w.want(l, lockstate.Lost, "the deadline")
	if r := w.release(l, false); r.again || !errors.Is(r.lost, ErrLockLost) {
		t.Fatalf("Release of a lost Lock: %+v", r)
	}
	w.want(l, lockstate.LostReleased, "Release of a lost Lock")
	if r := w.release(l, false); !r.again {
		t.Fatal("a second Release of a lost Lock was not refused")
	}
	w.lose(w.unsure(ttl))

	// Lost during an extension, which then settles on the lost Lock.
	for _, end := range []func(*Lock){
		func(l *Lock) { w.settle(l, w.yes()) },
		func(l *Lock) { w.settle(l, w.short()) },
		w.skip,
	} {
		for _, unsure := range []bool{false, true} {
			l = w.lock(ttl)
			if unsure {
				l = w.unsure(ttl)
			}
			w.renew(l)
			w.lose(l)
			end(l)
			w.want(l, lockstate.Lost, "an extension settled on a lost Lock")
			if l.Remaining() != 0 {
				t.Fatal("a late settle revived a lost Lock")
			}
		}
	}

	// Lost while Release waits for the extension in flight.
	for _, end := range []func(*Lock){
		func(l *Lock) { w.settle(l, w.yes()) },
		w.skip,
	} {
		for _, unsure := range []bool{false, true} {
			l = w.lock(ttl)
			if unsure {
				l = w.unsure(ttl)
			}
			w.renew(l)
			ch := w.releaseWaiting(l, true)
			w.lose(l)
			end(l)
			if r := <-ch; r.next != nil || !errors.Is(r.lost, ErrLockLost) {
				t.Fatalf("Release of a Lock lost meanwhile: %+v", r)
			}
			w.want(l, lockstate.LostReleased, "a loss during Release")
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

	// The expiry timer meets a table without the loss of a held Lock.
	l := w.lock(ttl)
	done := l.Done() // arms the expiry timer
	w.broken.Store(&lockstate.Row{From: lockstate.Held, On: lockstate.Lose})
	w.fc.Advance(ttl)
	waitClosed(t, done, "Done after an off-table end on the timer")
	w.broken.Store(nil)
	wantphaseError(t, l.Err(), "held", "lose")
	w.want(l, lockstate.Lost, "an off-table loss")
	wantLostEvent(t, lost, l)

	// held -pass-> is no row either.
	l = w.lock(ttl)
	done = l.Done()
	l.mu.Lock()
	l.to(lockstate.Pass)
	l.mu.Unlock()
	waitClosed(t, done, "Done after held -pass->")
	wantphaseError(t, l.Err(), "held", "pass")
	wantphaseError(t, context.Cause(l.Context()), "held", "pass")
	w.want(l, lockstate.Lost, "held -pass->")
	wantLostEvent(t, lost, l)
	if r := w.release(l, false); !errors.Is(r.lost, ErrInternal) {
		t.Fatalf("Release of the ended Lock: lost %v", r.lost)
	}
	for !strings.Contains(log.String(), `level=ERROR msg="redlock: internal error"`) ||
		!strings.Contains(log.String(), "in phase held has no transition on pass") {
		time.Sleep(time.Millisecond) // reported on another goroutine
	}

	// An ended Lock stays as it ended; the log alone says so.
	l.mu.Lock()
	l.to(lockstate.Extend)
	l.mu.Unlock()
	wantphaseError(t, l.Err(), "held", "pass")
	for !strings.Contains(log.String(), "in phase lost-released has no transition on extend") {
		time.Sleep(time.Millisecond)
	}

	// Without a logger of the Client's, slog.Default gets it.
	var def syncBuffer
	was := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&def, nil)))
	defer slog.SetDefault(was)
	bare := newPhaseWalk(t).lock(ttl)
	bare.mu.Lock()
	bare.to(lockstate.Confirm)
	bare.mu.Unlock()
	for !strings.Contains(def.String(), "in phase held has no transition on confirm") {
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
	if r := w.release(other, false); r.lost != nil || !errors.Is(other.Err(), ErrReleased) {
		t.Fatalf("release of another Lock: lost %v, Err %v", r.lost, other.Err())
	}
}

func wantphaseError(t *testing.T, err error, phase, event string) {
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
// phase table), recovered by the caller, leaves nothing locked: the same
// Lock and the Client go on, and Close returns.
func TestRecoveredPanicLeavesNothingLocked(t *testing.T) {
	w := newPhaseWalk(t)
	var boom atomic.Int32 // 1 + the event on which the hook panics, once
	w.c.o.phaseTable = func(from lockstate.Phase, on lockstate.Event) (lockstate.Phase, bool) {
		if boom.CompareAndSwap(int32(on)+1, 0) {
			panic("hook")
		}
		return lockstate.Next(from, on)
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
	boom.Store(int32(lockstate.Lose) + 1)
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
