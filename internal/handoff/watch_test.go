package handoff

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-go/redlock/transport"
)

// watchAsync runs w.Wait on its own goroutine.
func watchAsync(ctx context.Context, w *Watch, d time.Duration) <-chan result {
	ch := make(chan result, 1)
	go func() {
		ok, err := w.Wait(ctx, d)
		ch <- result{ok, err}
	}()
	return ch
}

// A Watch is woken by the release of any of its keys once a quorum of
// nodes announced it, once per release; it stands beside a key's local
// queue without taking part in it (a local Released or Offer does not
// reach it, and it does not wake the head).
func TestWatchWokenByAnyKey(t *testing.T) {
	h := local(t)
	h.quorum = 2
	w := h.Watch([]string{"b", "a", "b"})
	defer w.Leave()
	tn := h.EnterWant("a", nil)
	defer tn.Leave()
	ctx := context.Background()
	if r := get(t, waitAsync(ctx, tn, 0)); r.err != nil {
		t.Fatal(r.err)
	}
	if !h.Watched("a") || !h.Watched("b") || h.Watched("c") {
		t.Fatal("Watched does not name the Watch's keys")
	}
	ch := watchAsync(ctx, w, never)
	h.ReleasedOwner("a", "local") // a pass inside the process: the key stays held on the nodes
	h.notifyFrom(0, transport.Event{Kind: transport.Message, Channel: Channel("b"), Payload: "owner-1"})
	blocked(t, ch, "one node of two announced")
	h.notifyFrom(1, transport.Event{Kind: transport.Message, Channel: Channel("b"), Payload: "owner-1"})
	if r := get(t, ch); !r.woken || r.err != nil {
		t.Fatalf("Wait after a quorum announced b: %+v", r)
	}
	h.notifyFrom(2, transport.Event{Kind: transport.Message, Channel: Channel("b"), Payload: "owner-1"}) // the same release
	h.notifyFrom(0, transport.Event{Kind: transport.Message, Channel: Channel("c"), Payload: "owner-2"}) // not its key
	if r := get(t, watchAsync(ctx, w, time.Millisecond)); r.woken {
		t.Fatalf("woken again: %+v", r)
	}
	h.notify(transport.Event{Kind: transport.Message, Channel: Channel("a")}) // no payload: at once
	if r := get(t, watchAsync(ctx, w, never)); !r.woken {
		t.Fatalf("not woken by a's release: %+v", r)
	}
}

// A Watch's Wait ends at d (counted as the timer), with ErrLeft after
// Leave (also one in progress), and with ErrClosed after Close; a Watch
// started after Close is over at once.
func TestWatchEnds(t *testing.T) {
	h, err := New(nil, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w := h.Watch([]string{"k"})
	if r := get(t, watchAsync(ctx, w, time.Millisecond)); r.woken || r.err != nil {
		t.Fatalf("Wait(1ms): %+v; want ended by d", r)
	}
	if s := h.Stats(); s.Timer != 1 || s.Notified != 0 {
		t.Fatalf("stats %+v", s)
	}
	ch := watchAsync(ctx, w, never)
	w.Leave()
	w.Leave()
	if r := get(t, ch); !errors.Is(r.err, ErrLeft) {
		t.Fatalf("Wait across Leave: %+v; want ErrLeft", r)
	}
	if h.Watched("k") {
		t.Fatal("a key still watched after its only Watch left")
	}
	v := h.Watch([]string{"k"})
	ch = watchAsync(ctx, v, never)
	h.Close()
	if r := get(t, ch); !errors.Is(r.err, ErrClosed) {
		t.Fatalf("Wait across Close: %+v; want ErrClosed", r)
	}
	v.Leave()
	late := h.Watch([]string{"k"})
	if _, err := late.Wait(ctx, never); !errors.Is(err, ErrClosed) {
		t.Fatalf("Wait after Close: %v", err)
	}
	late.Leave()
}
