package core

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
)

// Options that differ between key families are given per call, on one
// Client: fencing for one key and not another, a max hold, a cap on
// attempts; bad ones are refused before any traffic.
func TestLockOptionsPerCall(t *testing.T) {
	c, _ := setup(t, 3)
	ctx := context.Background()

	fenced, err := c.TryLock(ctx, "po:fenced", 5*time.Second, redlock.WithFencing())
	if err != nil {
		t.Fatal(err)
	}
	plain, err := c.TryLock(ctx, "po:plain", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if fenced.Token() <= 0 || plain.Token() != 0 {
		t.Errorf("tokens: fenced %d, plain %d; want > 0 and 0", fenced.Token(), plain.Token())
	}

	held, err := c.TryLock(ctx, "po:held", 5*time.Second, redlock.WithMaxHold(6*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := held.Extend(ctx, 10*time.Second); !errors.Is(err, redlock.ErrMaxHold) {
		t.Errorf("Extend past the call's max hold = %v, want ErrMaxHold", err)
	}
	if err := plain.Extend(ctx, 10*time.Second); err != nil {
		t.Errorf("Extend of a lock without a max hold = %v", err)
	}

	_, err = c.Lock(ctx, "po:held", 5*time.Second, redlock.WithMaxAttempts(2), redlock.WithRetryBackoff(time.Millisecond, 2*time.Millisecond))
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) || !errors.Is(err, redlock.ErrNotObtained) || qe.Attempts != 2 {
		t.Errorf("Lock of a held key with WithMaxAttempts(2) = %v, want ErrNotObtained after 2 attempts", err)
	}

	for name, opts := range map[string][]redlock.LockOption{
		"nil option":        {nil},
		"negative max hold": {redlock.WithMaxHold(-time.Second)},
		"backoff min > max": {redlock.WithRetryBackoff(time.Second, time.Millisecond)},
	} {
		if _, err := c.TryLock(ctx, "po:bad", time.Second, opts...); !errors.Is(err, redlock.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	for _, l := range []*redlock.Lock{fenced, plain, held} {
		if err := l.Release(ctx); err != nil {
			t.Error(err)
		}
	}
}
