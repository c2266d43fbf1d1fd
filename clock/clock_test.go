package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestFake(t *testing.T) {
	start := time.Unix(1000, 0)
	f := NewFake(start)
	if !f.Now().Equal(start) {
		t.Fatalf("Now = %v, want %v", f.Now(), start)
	}
	f.Advance(3 * time.Second)
	if got := f.Now().Sub(start); got != 3*time.Second {
		t.Fatalf("after Advance: %v", got)
	}
	if err := f.Sleep(context.Background(), time.Second); err != nil {
		t.Fatal(err)
	}
	if got := f.Now().Sub(start); got != 4*time.Second {
		t.Fatalf("after Sleep: %v", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.Sleep(ctx, time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on cancelled ctx = %v", err)
	}
	if got := f.Now().Sub(start); got != 4*time.Second {
		t.Fatalf("cancelled Sleep advanced the clock: %v", got)
	}
}

func TestScaled(t *testing.T) {
	base := NewFake(time.Unix(0, 0))
	s := Scaled(base, 0.5)
	t0 := s.Now()
	base.Advance(10 * time.Second)
	if got := s.Now().Sub(t0); got != 5*time.Second {
		t.Fatalf("scaled elapsed = %v, want 5s", got)
	}
	// Sleeping 1s of scaled time takes 2s of base time.
	b0 := base.Now()
	if err := s.Sleep(context.Background(), time.Second); err != nil {
		t.Fatal(err)
	}
	if got := base.Now().Sub(b0); got != 2*time.Second {
		t.Fatalf("base advanced %v, want 2s", got)
	}
}

func TestRealSleepCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := Real().Sleep(ctx, time.Hour)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) > time.Minute {
		t.Fatal("Sleep ignored ctx")
	}
	if err := Real().Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatal(err)
	}
}

func TestScaledRejectsBadRate(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for rate 0")
		}
	}()
	Scaled(Real(), 0)
}
