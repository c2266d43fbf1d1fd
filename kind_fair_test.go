package redlock

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// frozenNodes are n local ports that accept connections and never answer,
// as a stopped (SIGSTOP) redis-server does; accepted counts connections.
type frozenNodes struct {
	clients  []redis.UniversalClient
	accepted atomic.Int32
}

func newFrozenNodes(t *testing.T, n int) *frozenNodes {
	f := &frozenNodes{}
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	var lns []net.Listener
	for i := 0; i < n; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
				f.accepted.Add(1)
			}
		}()
		lns = append(lns, ln)
		f.clients = append(f.clients, redis.NewClient(&redis.Options{Addr: ln.Addr().String(), ContextTimeoutEnabled: true, MaxRetries: -1}))
	}
	t.Cleanup(func() {
		for i, c := range f.clients {
			c.Close()
			lns[i].Close()
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return f
}

// A fair waiter whose ctx ends returns by its deadline with ctx's error,
// while another waiter of the same Client and key is in a ticket round
// that waits on frozen nodes.
func TestFairWaiterEndsWithItsCtx(t *testing.T) {
	f := newFrozenNodes(t, 3)
	c, err := New(f.clients, WithNodeTimeout(3*time.Second), WithRestartQuarantine(QuarantineOff))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	slowCtx, cancelSlow := context.WithCancel(context.Background())
	defer cancelSlow()
	slow := make(chan error, 1)
	go func() {
		_, err := c.Lock(slowCtx, "k", 30*time.Second, Fair())
		slow <- err
	}()
	for f.accepted.Load() < 3 { // the slow waiter's ticket round reached every node
		time.Sleep(time.Millisecond)
	}

	const wait = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	start := time.Now()
	_, err = c.Lock(ctx, "k", 30*time.Second, Fair())
	if took := time.Since(start); took > wait+time.Second {
		t.Errorf("the waiter with a %v ctx returned after %v", wait, took)
	}
	if !errors.Is(err, ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v: want ErrNotObtained and ctx's error", err)
	}
	select {
	case err := <-slow:
		t.Fatalf("the slow waiter returned first: %v", err)
	default:
	}
	cancelSlow()
	if err := <-slow; !errors.Is(err, context.Canceled) {
		t.Errorf("slow waiter: %v", err)
	}
}
