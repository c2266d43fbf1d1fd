package redlocktest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
)

func TestFailNode(t *testing.T) {
	c := New(t)
	cl := c.Client()
	ctx := context.Background()
	c.FailNode(0, true)
	l, err := cl.TryLock(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatalf("one node of three failed: %v", err)
	}
	l.Release(ctx)
	c.FailNode(1, true)
	_, err = cl.TryLock(ctx, "k", 10*time.Second)
	var qe *redlock.QuorumError
	if !errors.Is(err, redlock.ErrNotObtained) || !errors.As(err, &qe) {
		t.Fatalf("two nodes of three failed: %v, want ErrNotObtained with a *QuorumError", err)
	}
	for i, n := range qe.Nodes[:2] {
		if n.Err == nil || !strings.Contains(n.Err.Error(), "redlocktest: node") {
			t.Errorf("node %d: %v, want its injected error", i, n.Err)
		}
	}
	c.FailNode(0, false)
	c.FailNode(1, false)
	if _, err := cl.TryLock(ctx, "k", 10*time.Second); err != nil {
		t.Fatalf("healed: %v", err)
	}
}

func TestExpire(t *testing.T) {
	c := New(t)
	a, b := c.Client(), c.Client()
	ctx := context.Background()
	l, err := a.TryLock(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Expire(l)
	select {
	case <-l.Done():
	default:
		t.Fatal("Expire returned before Done")
	}
	if _, err := b.TryLock(ctx, "k", 10*time.Second); err != nil {
		t.Fatalf("after Expire: %v", err)
	}
}

// TestBlockingLock: a Lock on a held key returns once another goroutine
// advances past the holder's TTL, and once the holder releases.
func TestBlockingLock(t *testing.T) {
	c := New(t)
	cl := c.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, free := range []string{"advance", "release"} {
		h := c.Hold("k-"+free, 10*time.Second)
		got := make(chan error, 1)
		go func() {
			l, err := cl.Lock(ctx, "k-"+free, 10*time.Second)
			if err == nil {
				err = l.Release(ctx)
			}
			got <- err
		}()
		if free == "advance" {
			c.Advance(11 * time.Second)
		} else {
			h.Release(ctx)
		}
		if err := <-got; err != nil {
			t.Fatalf("Lock after %s: %v", free, err)
		}
	}
}
