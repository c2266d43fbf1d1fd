package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/observe"
)

// Close while Lock calls are in flight: once Close has returned, no call
// hands out a lock (a round that wins after Close began is undone and
// fails with ErrClosed), every Lock call still retrying stops with
// ErrClosed instead of running on to its own ctx deadline, and nothing is
// left on the nodes but the locks that were handed out before.
//
// The check cannot pass by luck the wrong way: the observer runs inside
// Lock just before it returns a lock, so a lock handed out after Close
// returned is seen with the flag already set.
func TestCloseStopsLockCalls(t *testing.T) {
	for _, own := range []bool{true, false} {
		t.Run(fmt.Sprintf("ownClients=%v", own), func(t *testing.T) {
			nodes := harness.Start(t, 5, harness.Config{})
			var closeReturned atomic.Bool
			var mu sync.Mutex
			handed := map[string]bool{} // owner values of locks handed out
			late := 0                   // locks handed out after Close returned
			watch := redlock.WithObserver(func(e observe.Event) {
				if e.Op != "acquire" || e.Err != nil {
					return
				}
				mu.Lock()
				handed[e.Lock.Owner()] = true
				if closeReturned.Load() {
					late++
				}
				mu.Unlock()
			})
			// A node timeout that a loaded machine does not reach: a
			// clean-up cut short would leave a key behind (as it would in
			// production), which is not what this test is about.
			c := closeClient(t, nodes, own, watch, redlock.WithNodeTimeout(2*time.Second))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var wg sync.WaitGroup
			var acquired atomic.Int64
			errs := make(chan error, 16)
			for w := 0; w < 16; w++ {
				key := "hot"
				if w%2 == 0 {
					key = fmt.Sprintf("own%d", w) // rounds in flight all the time
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						l, err := c.Lock(ctx, key, 5*time.Second)
						if err != nil {
							errs <- err
							return
						}
						acquired.Add(1)
						_ = l.Release(ctx) // may fail with ErrClosed once Close began
					}
				}()
			}
			for acquired.Load() < 200 {
				time.Sleep(time.Millisecond)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			closeReturned.Store(true)
			wg.Wait()
			close(errs)
			for err := range errs {
				if !errors.Is(err, redlock.ErrClosed) {
					t.Errorf("Lock call ended with %v, want ErrClosed", err)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if late > 0 {
				t.Fatalf("%d locks handed out after Close returned", late)
			}
			// What is left on the nodes belongs to locks handed out before
			// Close (their Release may have met ErrClosed), never to a round
			// that won after Close began and was not undone.
			for i := 0; i < 16; i += 2 {
				checkLeftovers(t, nodes, fmt.Sprintf("own%d", i), handed)
			}
			checkLeftovers(t, nodes, "hot", handed)
		})
	}
}

func closeClient(t *testing.T, nodes []*harness.Node, own bool, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	if !own {
		return client(t, nodes, opts...)
	}
	clients := make([]redis.UniversalClient, len(nodes))
	for i, n := range nodes {
		cl := n.Client()
		t.Cleanup(func() { _ = cl.Close() })
		clients[i] = cl
	}
	c, err := redlock.New(clients, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func checkLeftovers(t *testing.T, nodes []*harness.Node, key string, handed map[string]bool) {
	t.Helper()
	vals, _ := raw(t, nodes, key)
	for i, v := range vals {
		if v != "" && !handed[v] {
			t.Errorf("node %d holds %q = %q, a value no lock was handed out for", i, key, v)
		}
	}
}

// After Close, every call fails with ErrClosed before any traffic.
func TestCallsAfterCloseFail(t *testing.T) {
	c, _ := setup(t, 3)
	ctx := context.Background()
	l, err := c.TryLock(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lock(ctx, "k2", time.Second); !errors.Is(err, redlock.ErrClosed) {
		t.Errorf("Lock after Close = %v", err)
	}
	if err := l.Extend(ctx, time.Second); !errors.Is(err, redlock.ErrClosed) {
		t.Errorf("Extend after Close = %v", err)
	}
	if err := l.Release(ctx); !errors.Is(err, redlock.ErrClosed) || !errors.Is(err, redlock.ErrNotHeld) {
		t.Errorf("Release after Close = %v, want ErrClosed and ErrNotHeld", err)
	}
}
