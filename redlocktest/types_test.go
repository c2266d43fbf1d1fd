package redlocktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
)

// The lock types run on the test double too: their scripts, entries and
// expiries on the nodes' (fake) clock.
func TestTypes(t *testing.T) {
	c := New(t)
	a, b := c.Client(), c.Client()
	ctx := context.Background()
	r1, err := a.TryLock(ctx, "rw", 10*time.Second, redlock.ReadLock())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryLock(ctx, "rw", 10*time.Second, redlock.ReadLock()); err != nil {
		t.Fatalf("second reader: %v", err)
	}
	if _, err := b.TryLock(ctx, "rw", 10*time.Second, redlock.WriteLock()); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("writer beside readers: %v", err)
	}
	c.Advance(11 * time.Second) // both readers' entries run out
	if _, err := b.TryLock(ctx, "rw", 10*time.Second, redlock.WriteLock()); err != nil {
		t.Fatalf("writer after the readers expired: %v", err)
	}
	if err := r1.Err(); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("expired reader: %v", err)
	}

	re, err := a.TryLock(ctx, "re", 10*time.Second, redlock.Reentrant())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.TryLock(redlock.WithLock(ctx, re), "re", 10*time.Second, redlock.Reentrant()); err != nil {
		t.Fatalf("re-entry: %v", err)
	}
	if _, err := b.TryLock(ctx, "re", 10*time.Second, redlock.Reentrant()); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("second holder: %v", err)
	}

	for i := 0; i < 2; i++ {
		if _, err := a.TryLock(ctx, "sem", 10*time.Second, redlock.Permits(2)); err != nil {
			t.Fatalf("permit %d: %v", i, err)
		}
	}
	if _, err := b.TryLock(ctx, "sem", 10*time.Second, redlock.Permits(2)); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("third holder of 2 permits: %v", err)
	}

	f, err := a.TryLock(ctx, "fair", 10*time.Second, redlock.Fair())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryLock(ctx, "fair", 10*time.Second, redlock.Fair()); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("second fair holder: %v", err)
	}
	_ = f.Release(ctx)
}
