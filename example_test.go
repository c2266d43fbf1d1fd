package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe"
)

// Lock a resource across five independent Redis masters (the nodes of the
// repository's docker-compose.yml).
func Example() {
	c, err := redlock.NewFromURLs([]string{
		"redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003",
		"redis://127.0.0.1:7004", "redis://127.0.0.1:7005",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	l, err := c.Lock(ctx, "stock:sku-42", 10*time.Second)
	if err != nil {
		log.Fatal(err) // errors.Is(err, redlock.ErrNotObtained)
	}
	defer l.Release(context.Background())

	// Act only while the validity lasts, and stop before it runs out.
	work, cancelWork := context.WithDeadline(ctx, l.Deadline())
	defer cancelWork()
	_ = work
}

// New takes your own go-redis clients, one per independent master.
// ContextTimeoutEnabled lets the per-node deadline reach the socket.
func ExampleNew() {
	var nodes []redis.UniversalClient
	for _, addr := range []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"} {
		nodes = append(nodes, redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true}))
	}
	c, err := redlock.New(nodes,
		redlock.WithNodeTimeout(20*time.Millisecond),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
}

// TryLock makes one attempt; tell "someone else has it" from other failures.
func ExampleClient_TryLock() {
	c, err := redlock.NewFromURLs([]string{"redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	l, err := c.TryLock(context.Background(), "settlement:2026-12-02", time.Minute)
	var qe *redlock.QuorumError
	switch {
	case err == nil:
		defer l.Release(context.Background())
	case errors.As(err, &qe):
		for _, n := range qe.Nodes {
			fmt.Println(n.Addr, n.Vote, n.Err, n.Latency)
		}
		return
	default:
		log.Fatal(err)
	}
}

// LockKeys locks several resources at once, all or nothing on each node.
func ExampleClient_LockKeys() {
	c, err := redlock.NewFromURLs([]string{"redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	l, err := c.LockKeys(context.Background(), []string{"account:A", "account:B"}, 5*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(context.Background())
}

// Extend keeps a long job's lock alive; ErrLockLost means stop at once.
func ExampleLock_Extend() {
	c, err := redlock.NewFromURLs([]string{"redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	l, err := c.Lock(ctx, "job:nightly", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)
	switch err := l.Extend(ctx, 30*time.Second); {
	case errors.Is(err, redlock.ErrLockLost):
		log.Print("lock lost: abort the job")
	case errors.Is(err, redlock.ErrNotExtended):
		log.Printf("not extended; still valid for %v", l.Remaining())
	}
}

// Observers see every operation and every node call; the redlockotel module
// turns them into OpenTelemetry metrics. Observers run on the caller's (or
// the node call's) goroutine and must be fast.
func ExampleWithNodeObserver() {
	c, err := redlock.NewFromURLs([]string{"redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"},
		redlock.WithObserver(func(e observe.Event) {
			if e.Op == "release" && e.Attempts > 0 && e.Remaining == 0 {
				log.Printf("lock %v released after its deadline: the holder overran it", e.Keys)
			}
		}),
		redlock.WithNodeObserver(func(e observe.NodeEvent) {
			if e.Timeout() {
				log.Printf("node %s timed out on %s after %v (late: %v)", e.Addr, e.Op, e.Latency, e.Late)
			}
		}),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
}

// Run holds a lock while the work runs, however long it takes: it is taken
// in watchdog mode (renewed in the background), the work's ctx is
// cancelled if the lock is lost, and the lock is released when the work
// returns.
func ExampleClient_Run() {
	c, err := redlock.NewFromURLs([]string{"redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"},
		redlock.WithWatchdog(30*time.Second, 10*time.Second), // the defaults
		redlock.WithMaxHold(time.Hour))                       // a hung job loses the lock after an hour
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	err = c.Run(context.Background(), "settlement:2026-12-02", func(ctx context.Context) error {
		// Work, checking ctx: it is done when the lock is lost.
		<-ctx.Done()
		return ctx.Err()
	})
	if errors.Is(err, redlock.ErrLockLost) {
		log.Print("lost the lock while settling: the work was cut short")
	}
}

// A lock taken with the Watchdog TTL is renewed until Release; Done and
// Context say at once when it is lost.
func ExampleLock_Done() {
	c, err := redlock.NewFromURLs([]string{"redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	l, err := c.Lock(context.Background(), "order:42", redlock.Watchdog)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(context.Background())
	select {
	case <-l.Done():
		log.Printf("lost: %v", l.Err()) // errors.Is(l.Err(), redlock.ErrLockLost)
	case <-time.After(time.Minute): // the work
	}
}

// With WithFencing every lock carries a token that grows with each holder;
// the protected resource refuses writes with a lower token than it has
// seen, so a holder paused past its deadline cannot overwrite the next
// holder's work (see package fence for Redis-held resources).
func ExampleLock_Token() {
	c, err := redlock.NewFromURLs([]string{"redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"},
		redlock.WithFencing())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	l, err := c.Lock(ctx, "stock:sku-42", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)
	// In SQL: zero rows updated means a later holder has written.
	const q = `UPDATE stock SET qty = qty - 1, fence = $1 WHERE id = $2 AND fence < $1`
	_ = q
	fmt.Println("write with token", l.Token())
}

// A reentrant hold entered again by code that runs under it: the ctx
// carries the hold's Lock, so the inner call does not wait for itself.
func ExampleReentrant() {
	c, err := redlock.NewFromURLs([]string{"redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	outer, err := c.Lock(ctx, "account:7", 10*time.Second, redlock.Reentrant())
	if err != nil {
		log.Fatal(err)
	}
	defer outer.Release(ctx)
	inner, err := c.Lock(redlock.WithLock(ctx, outer), "account:7", 10*time.Second, redlock.Reentrant())
	if err != nil {
		log.Fatal(err) // matches ErrLockLost as cause once the hold is lost
	}
	defer inner.Release(ctx)
}

// Readers share the key; a writer holds it alone.
func ExampleReadLock() {
	c, err := redlock.NewFromURLs([]string{"redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	r, err := c.Lock(ctx, "config", 10*time.Second, redlock.ReadLock())
	if err != nil {
		log.Fatal(err)
	}
	defer r.Release(ctx)
	if _, err := c.TryLock(redlock.WithLock(ctx, r), "config", 10*time.Second, redlock.WriteLock()); errors.Is(err, redlock.ErrHeldByCaller) {
		fmt.Println("a reader cannot upgrade: release, then take the write lock")
	}
}
