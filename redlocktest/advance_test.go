package redlocktest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe"
)

// closed reports whether ch is closed now, without waiting.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestAdvanceDelivers: when Advance returns, every loss it caused has been
// delivered: Done closed, Context cancelled with Err as its cause, and the
// Clients' observers told, whether or not Done or Context was called
// before; no waiting on the test's side.
func TestAdvanceDelivers(t *testing.T) {
	c := New(t)
	var mu sync.Mutex
	lost := map[*redlock.Lock]bool{}
	cl := c.Client(redlock.WithObserver(func(e observe.Event) {
		if e.Op == observe.OpLost {
			mu.Lock()
			lost[e.Lock.(*redlock.Lock)] = true
			mu.Unlock()
		}
	}))
	ctx := context.Background()
	delivered := func(what string, l *redlock.Lock) {
		t.Helper()
		mu.Lock()
		told := lost[l]
		mu.Unlock()
		if !told {
			t.Errorf("%s: the observer has not seen the loss when Advance returned", what)
		}
		if !closed(l.Done()) {
			t.Errorf("%s: Done not closed when Advance returned", what)
		}
		if err := context.Cause(l.Context()); !errors.Is(err, redlock.ErrLockLost) {
			t.Errorf("%s: Context's cause %v when Advance returned, want ErrLockLost", what, err)
		}
		if err := l.Err(); !errors.Is(err, redlock.ErrLockLost) {
			t.Errorf("%s: Err %v, want ErrLockLost", what, err)
		}
	}
	for i := 0; i < 20; i++ {
		ttl, err := cl.TryLock(ctx, "ttl", 10*time.Second) // Done and Context first called after the deadline
		if err != nil {
			t.Fatal(err)
		}
		c.Advance(11 * time.Second)
		delivered("deadline passed", ttl)

		wd, err := cl.TryLock(ctx, "watchdog", redlock.Watchdog)
		if err != nil {
			t.Fatal(err)
		}
		c.Lose("watchdog")
		c.Advance(10 * time.Second) // the renewal finds it gone; its loss is reported on a Client goroutine
		delivered("renewal found it gone", wd)
		if t.Failed() {
			t.Fatalf("round %d", i)
		}
	}
}
