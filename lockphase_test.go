package redlock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock/clock"
	"github.com/redlock-go/redlock/internal/lockstate"
	"github.com/redlock-go/redlock/internal/quorum"
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

func newPhaseWalk(t *testing.T) *phaseWalk {
	w := &phaseWalk{t: t, fc: clock.NewFake(time.Unix(100, 0)), seen: map[lockstate.Row]int{}}
	c, err := New(unreachable(3), WithClock(w.fc), WithRestartQuarantine(QuarantineOff))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
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

// A transition the table does not list panics instead of passing unseen.
func TestLockPhaseOffTablePanics(t *testing.T) {
	w := newPhaseWalk(t)
	l := w.lock(time.Second)
	defer func() {
		if recover() == nil {
			t.Fatal("held -pass-> accepted")
		}
	}()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.to(lockstate.Pass)
}
