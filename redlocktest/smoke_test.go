package redlocktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
)

func TestSmoke(t *testing.T) {
	c := New(t)
	a, b := c.Client(), c.Client()
	ctx := context.Background()
	l, err := a.TryLock(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.TryLock(ctx, "k", 10*time.Second)
	var qe *redlock.QuorumError
	if !errors.Is(err, redlock.ErrNotObtained) || !errors.As(err, &qe) {
		t.Fatal(err)
	}
	c.Expire(l)
	<-l.Done()
	l2, err := b.TryLock(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
