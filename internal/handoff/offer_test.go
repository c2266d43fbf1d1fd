package handoff

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-go/redlock/transport"
)

// Offer hands a value to the head whose want fits; a head that leaves
// without taking it passes it to the next head that fits, and with none
// left it goes to reject.
func TestOffer(t *testing.T) {
	h := local(t)
	ctx := context.Background()
	fitsBig := func(want any) bool { return want == "big" }
	var rejected []any
	reject := func(v any) { rejected = append(rejected, v) }

	if h.Offer("k", 1, fitsBig, reject) {
		t.Fatal("offered with no waiter")
	}
	small := h.EnterWant("k", "small")
	big := h.EnterWant("k", "big")
	if h.Offer("k", 2, fitsBig, reject) {
		t.Fatal("handed to a head whose want does not fit")
	}
	small.Leave() // big is head now
	if r := get(t, waitAsync(ctx, big, 0)); !r.woken || r.err != nil {
		t.Fatalf("promotion: %+v", r)
	}
	ch := waitAsync(ctx, big, never)
	blocked(t, ch, "head with nothing pending")
	if !h.Offer("k", 3, fitsBig, reject) {
		t.Fatal("not handed to a fitting head")
	}
	if r := get(t, ch); !r.woken || r.err != nil {
		t.Fatalf("Wait after Offer: %+v", r)
	}
	if v := big.Take(); v != 3 || big.Take() != nil {
		t.Fatalf("Take = %v, then not nil", v)
	}

	// A head that leaves without taking: the next head that fits gets it.
	next := h.EnterWant("k", "big")
	if !h.Offer("k", 4, fitsBig, reject) {
		t.Fatal("not handed")
	}
	big.Leave()
	if r := get(t, waitAsync(ctx, next, never)); !r.woken {
		t.Fatalf("next head: %+v", r)
	}
	if v := next.Take(); v != 4 {
		t.Fatalf("next head took %v", v)
	}
	// ... and with nobody left, reject gets it.
	if !h.Offer("k", 5, fitsBig, reject) {
		t.Fatal("not handed")
	}
	next.Leave()
	if len(rejected) != 1 || rejected[0] != 5 {
		t.Fatalf("rejected %v", rejected)
	}
	if s := h.Stats(); s.Handed != 2 {
		t.Fatalf("Handed = %d, want 2 (taken)", s.Handed)
	}
}

// Close makes a head that still holds an offer give it to reject when it
// leaves.
func TestOfferAfterClose(t *testing.T) {
	h := local(t)
	var rejected []any
	tn := h.EnterWant("k", nil)
	if !h.Offer("k", 1, func(any) bool { return true }, func(v any) { rejected = append(rejected, v) }) {
		t.Fatal("not handed")
	}
	h.Close()
	if _, err := tn.Wait(context.Background(), never); err != ErrClosed {
		t.Fatalf("Wait after Close = %v", err)
	}
	tn.Leave()
	if len(rejected) != 1 {
		t.Fatalf("rejected %v", rejected)
	}
}

// With a quorum, one release wakes the head once a quorum of nodes have
// announced it (the same payload), not at the first node: the others may
// still hold the key.
func TestNotificationQuorum(t *testing.T) {
	h := local(t)
	h.quorum = 2 // as for a Client with three nodes (New caps it at the subscribed nodes)
	tn := h.EnterWant("k", nil)
	defer tn.Leave()
	ctx := context.Background()
	if r := get(t, waitAsync(ctx, tn, 0)); r.err != nil {
		t.Fatal(r.err)
	}
	ch := waitAsync(ctx, tn, never)
	h.notifyFrom(0, transport.Event{Kind: transport.Message, Channel: Channel("k"), Payload: "owner-1"})
	h.notifyFrom(0, transport.Event{Kind: transport.Message, Channel: Channel("k"), Payload: "owner-1"}) // the same node again
	blocked(t, ch, "one node of two announced")
	h.notifyFrom(2, transport.Event{Kind: transport.Message, Channel: Channel("k"), Payload: "owner-1"})
	if r := get(t, ch); !r.woken {
		t.Fatalf("after a quorum: %+v", r)
	}
	h.notifyFrom(1, transport.Event{Kind: transport.Message, Channel: Channel("k"), Payload: "owner-1"}) // the third: a duplicate
	if s := h.Stats(); s.Notified != 1 || s.Duplicates != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// Pause ends at d, or at a wake-up, consumed as by Wait: an Offer (the
// next head does not see it) or a release.
func TestPause(t *testing.T) {
	h := local(t)
	ctx := context.Background()
	fits := func(any) bool { return true }
	head := h.EnterWant("k", nil)
	next := h.EnterWant("k", nil)
	if r := get(t, waitAsync(ctx, head, 0)); r.err != nil {
		t.Fatalf("head: %+v", r)
	}
	start := time.Now()
	if err := head.Pause(ctx, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 20*time.Millisecond {
		t.Fatal("Pause ended early without a wake-up")
	}
	if s := h.Stats(); s.Timer != 0 {
		t.Fatalf("Pause counted as a wait ended by the timer: %+v", s)
	}
	h.ReleasedOwner("k", "")
	if err := head.Pause(ctx, never); err != nil {
		t.Fatal(err)
	}
	if r := get(t, waitAsync(ctx, head, 0)); r.woken {
		t.Fatal("the release that ended Pause was left pending")
	}
	done := make(chan error, 1)
	go func() { done <- head.Pause(ctx, never) }()
	time.Sleep(5 * time.Millisecond)
	if !h.Offer("k", 7, fits, func(any) {}) {
		t.Fatal("not handed to the pausing head")
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(hang):
		t.Fatal("Pause did not end at the Offer")
	}
	if v := head.Take(); v != 7 {
		t.Fatalf("Take = %v", v)
	}
	head.LeaveHolding()
	ch := waitAsync(ctx, next, never)
	time.Sleep(10 * time.Millisecond)                             // a Wait that would return has by now
	blocked(t, ch, "next head while this process holds the lock") // the Offer was consumed
	next.Leave()
	if err := head.Pause(ctx, never); !errors.Is(err, ErrLeft) {
		t.Fatalf("Pause after Leave: %v, want ErrLeft", err)
	}
}
