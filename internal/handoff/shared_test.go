package handoff

import (
	"context"
	"testing"
	"time"
)

// parked asserts that tn, whose Wait runs on ch, is blocked in it: once it
// waits, and still after a moment in which a wrong wake-up would show.
func parked(t *testing.T, h *Hub, tn *Turn, ch <-chan result, what string) {
	t.Helper()
	for end := time.Now().Add(hang); !h.waiting(tn); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s never waited", what)
		}
	}
	time.Sleep(10 * time.Millisecond)
	blocked(t, ch, what)
}

// A shared waiter that leaves with the lock admits the shared waiters
// queued behind it at once, up to the first waiter that is not shared;
// that one keeps its place and stops the shared waiters behind it.
func TestSharedRunAdmittedTogether(t *testing.T) {
	h := local(t)
	ctx := context.Background()
	r1 := h.EnterShared("k", nil)
	r2 := h.EnterShared("k", nil)
	r3 := h.EnterShared("k", nil)
	w := h.EnterWant("k", nil)
	r4 := h.EnterShared("k", nil)
	if r := get(t, waitAsync(ctx, r1, 0)); r.err != nil {
		t.Fatalf("head: %+v", r)
	}
	c2, c3 := waitAsync(ctx, r2, never), waitAsync(ctx, r3, never)
	cw, c4 := waitAsync(ctx, w, never), waitAsync(ctx, r4, never)
	parked(t, h, r3, c3, "third reader before the first got in")

	r1.LeaveShared()
	for i, c := range []<-chan result{c2, c3} {
		if r := get(t, c); !r.woken || r.err != nil {
			t.Fatalf("reader %d behind the first: %+v, want woken", i+2, r)
		}
	}
	parked(t, h, w, cw, "writer")
	parked(t, h, r4, c4, "reader behind the writer")

	// The admitted readers get in: the writer is head and tries; the
	// reader behind it still waits.
	r3.LeaveShared()
	parked(t, h, w, cw, "writer behind a reader still trying")
	r2.LeaveShared()
	if r := get(t, cw); !r.woken || r.err != nil {
		t.Fatalf("writer: %+v", r)
	}
	parked(t, h, r4, c4, "reader behind the writer")
	w.LeaveHolding()
	parked(t, h, r4, c4, "reader while the writer holds")
	h.ReleasedOwner("k", "")
	if r := get(t, c4); !r.woken || r.err != nil {
		t.Fatalf("reader after the writer's release: %+v", r)
	}
	r4.Leave()
}

// A process's release of the lock wakes a shared head together with the
// shared waiters behind it, up to a waiter that is not shared.
func TestReleasedAdmitsSharedRun(t *testing.T) {
	h := local(t)
	ctx := context.Background()
	w := h.EnterWant("k", nil)
	if r := get(t, waitAsync(ctx, w, 0)); r.err != nil {
		t.Fatal(r.err)
	}
	r1, r2 := h.EnterShared("k", nil), h.EnterShared("k", nil)
	w2 := h.EnterWant("k", nil)
	r3 := h.EnterShared("k", nil)
	w.LeaveHolding()
	c1, c2 := waitAsync(ctx, r1, never), waitAsync(ctx, r2, never)
	cw, c3 := waitAsync(ctx, w2, never), waitAsync(ctx, r3, never)
	parked(t, h, r1, c1, "reader while the writer holds")
	parked(t, h, r2, c2, "second reader while the writer holds")
	h.ReleasedOwner("k", "writer")
	for i, c := range []<-chan result{c1, c2} {
		if r := get(t, c); !r.woken || r.err != nil {
			t.Fatalf("reader %d: %+v, want woken", i+1, r)
		}
	}
	parked(t, h, w2, cw, "second writer")
	parked(t, h, r3, c3, "reader behind the second writer")
	for _, x := range []*Turn{r1, r2, w2, r3} {
		x.Leave()
	}
}

// While every queued waiter is a shared one admitted after a shared
// waiter got in, a shared waiter that enters is admitted at once; a try
// that fails (Wait again) or a waiter that is not shared ends that.
func TestSharingAdmitsNewcomers(t *testing.T) {
	h := local(t)
	ctx := context.Background()
	r1, r2 := h.EnterShared("k", nil), h.EnterShared("k", nil)
	if r := get(t, waitAsync(ctx, r1, 0)); r.err != nil {
		t.Fatal(r.err)
	}
	c2 := waitAsync(ctx, r2, never)
	r1.LeaveShared()
	if r := get(t, c2); !r.woken {
		t.Fatalf("second reader: %+v", r)
	}
	// r2 is trying: a newcomer tries beside it.
	r3 := h.EnterShared("k", nil)
	if r := get(t, waitAsync(ctx, r3, never)); !r.woken || r.err != nil {
		t.Fatalf("newcomer while readers get in: %+v", r)
	}
	// r3's try failed: it waits again, and the next newcomer waits too.
	c3 := waitAsync(ctx, r3, never)
	parked(t, h, r3, c3, "reader whose try failed")
	r4 := h.EnterShared("k", nil)
	c4 := waitAsync(ctx, r4, never)
	parked(t, h, r4, c4, "newcomer after a failed try")
	for _, x := range []*Turn{r2, r3, r4} {
		x.Leave()
	}

	// A waiter that is not shared stops the admission of newcomers.
	a, b := h.EnterShared("j", nil), h.EnterShared("j", nil)
	if r := get(t, waitAsync(ctx, a, 0)); r.err != nil {
		t.Fatal(r.err)
	}
	cb := waitAsync(ctx, b, never)
	a.LeaveShared()
	get(t, cb)
	w := h.EnterWant("j", nil)
	late := h.EnterShared("j", nil)
	cl := waitAsync(ctx, late, never)
	parked(t, h, late, cl, "reader behind a writer")
	for _, x := range []*Turn{b, w, late} {
		x.Leave()
	}
}

// EnterAhead puts a waiter behind the last waiter that is not shared,
// ahead of the shared waiters after it; first if there is none.
func TestEnterAhead(t *testing.T) {
	h := local(t)
	ctx := context.Background()
	r1, r2 := h.EnterShared("k", nil), h.EnterShared("k", nil)
	w := h.EnterAhead("k", nil)
	if r := get(t, waitAsync(ctx, w, 0)); r.err != nil {
		t.Fatalf("writer entered ahead of readers only: %+v, want head", r)
	}
	c1 := waitAsync(ctx, r1, never)
	w2 := h.EnterAhead("k", nil) // behind w, ahead of the readers
	c2 := waitAsync(ctx, w2, never)
	parked(t, h, r1, c1, "reader behind the writers")
	w.LeaveHolding()
	h.ReleasedOwner("k", "")
	if r := get(t, c2); !r.woken || r.err != nil {
		t.Fatalf("second writer: %+v", r)
	}
	parked(t, h, r1, c1, "reader behind the second writer")
	w2.Leave()
	if r := get(t, c1); !r.woken || r.err != nil {
		t.Fatalf("reader: %+v", r)
	}
	r1.Leave()
	r2.Leave()
	if h.Queued("k") {
		t.Fatal("queue left behind")
	}
}

// A head made head by LeaveHolding does not try on a wake-up that came
// before the lock was taken: it waits for the release.
func TestLeaveHoldingDropsStaleWake(t *testing.T) {
	h := local(t)
	ctx := context.Background()
	a, b := h.EnterWant("k", nil), h.EnterWant("k", nil)
	if r := get(t, waitAsync(ctx, a, 0)); r.err != nil {
		t.Fatal(r.err)
	}
	h.ReleasedOwner("k", "") // a release a saw before it got the lock
	a.LeaveHolding()
	cb := waitAsync(ctx, b, never)
	parked(t, h, b, cb, "next head while the lock is held")
	h.ReleasedOwner("k", "")
	if r := get(t, cb); !r.woken || r.err != nil {
		t.Fatalf("next head after the release: %+v", r)
	}
	b.Leave()
}
