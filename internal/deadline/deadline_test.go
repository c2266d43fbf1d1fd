package deadline

import (
	"context"
	"errors"
	"testing"
	"time"
)

type key struct{}

func TestWithinSharesSlotAndKeepsValues(t *testing.T) {
	s := New()
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	before := time.Now()
	a := s.Within(parent, time.Hour)
	b := s.Within(parent, time.Hour)
	cancel() // the caller's cancellation does not reach the calls
	if a.Err() != nil || b.Err() != nil {
		t.Fatalf("ended with the parent: %v %v", a.Err(), b.Err())
	}
	if a.Value(key{}) != "v" {
		t.Fatalf("value lost: %v", a.Value(key{}))
	}
	da, ok := a.Deadline()
	if !ok || da.Before(before.Add(time.Hour)) || da.After(time.Now().Add(time.Hour+time.Hour/32)) {
		t.Fatalf("deadline %v, want within [now+1h, now+1h+1h/32]", da)
	}
	db, _ := b.Deadline()
	if db.Sub(da) > time.Hour/32 || db.Before(da) {
		t.Fatalf("deadlines %v and %v: more than one slot apart", da, db)
	}
	if db.Equal(da) && a.Done() != b.Done() {
		t.Fatal("two contexts of one slot do not share its Done channel")
	}
}

func TestWithinEnds(t *testing.T) {
	s := New()
	ctx := s.Within(context.Background(), time.Millisecond)
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("not done 10s after a 1ms deadline")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err = %v, want DeadlineExceeded", ctx.Err())
	}
	// A later deadline gets a live context, not the ended slot's.
	if next := s.Within(context.Background(), time.Hour); next.Err() != nil {
		t.Fatalf("new context already ended: %v", next.Err())
	}
}
