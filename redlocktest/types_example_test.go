package redlocktest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/redlocktest"
)

// A reentrant hold: a call whose ctx carries the hold's Lock enters it
// instead of waiting for itself; another process waits for the whole hold.
func Example_reentrant() {
	t := &exampleT{}
	defer t.done()
	ctx := context.Background()
	cluster := redlocktest.New(t)
	a, b := cluster.Client(), cluster.Client()

	outer, _ := a.TryLock(ctx, "account:7", 10*time.Second, redlock.Reentrant())
	inner, err := a.TryLock(redlock.WithLock(ctx, outer), "account:7", 10*time.Second, redlock.Reentrant())
	fmt.Println("entered again:", err == nil, inner.Kind())
	_, err = b.TryLock(ctx, "account:7", 10*time.Second, redlock.Reentrant())
	fmt.Println("other process refused:", errors.Is(err, redlock.ErrNotObtained))
	_ = outer.Release(ctx)
	_, err = b.TryLock(ctx, "account:7", 10*time.Second, redlock.Reentrant())
	fmt.Println("still held by the inner entry:", errors.Is(err, redlock.ErrNotObtained))
	_ = inner.Release(ctx)
	_, err = b.TryLock(ctx, "account:7", 10*time.Second, redlock.Reentrant())
	fmt.Println("free after the last entry:", err == nil)
	// Output:
	// entered again: true reentrant
	// other process refused: true
	// still held by the inner entry: true
	// free after the last entry: true
}

// Readers share the key; a writer holds it alone, and a refused writer
// keeps new readers out until it gets in.
func Example_readWrite() {
	t := &exampleT{}
	defer t.done()
	ctx := context.Background()
	cluster := redlocktest.New(t)
	a, b := cluster.Client(), cluster.Client()

	r1, _ := a.TryLock(ctx, "config", 10*time.Second, redlock.ReadLock())
	r2, err := b.TryLock(ctx, "config", 10*time.Second, redlock.ReadLock())
	fmt.Println("two readers:", err == nil)
	_, err = b.TryLock(ctx, "config", 10*time.Second, redlock.WriteLock())
	fmt.Println("writer refused:", errors.Is(err, redlock.ErrNotObtained))
	_, err = a.TryLock(ctx, "config", 10*time.Second, redlock.ReadLock())
	fmt.Println("new reader refused while the writer waits:", errors.Is(err, redlock.ErrNotObtained))
	_ = r1.Release(ctx)
	_ = r2.Release(ctx)
	w, err := b.TryLock(ctx, "config", 10*time.Second, redlock.WriteLock())
	fmt.Println("writer in:", err == nil, w.Kind())
	// Output:
	// two readers: true
	// writer refused: true
	// new reader refused while the writer waits: true
	// writer in: true write
}

// At most n holders of a semaphore; each holds a permit of its own.
func Example_semaphore() {
	t := &exampleT{}
	defer t.done()
	ctx := context.Background()
	cluster := redlocktest.New(t)
	c := cluster.Client()

	var held []*redlock.Lock
	for i := 0; i < 3; i++ {
		l, err := c.TryLock(ctx, "settlement", 10*time.Second, redlock.Permits(2))
		if err != nil {
			fmt.Println("holder", i+1, "refused:", errors.Is(err, redlock.ErrNotObtained))
			continue
		}
		held = append(held, l)
		fmt.Println("holder", i+1, "in")
	}
	fmt.Println("distinct permits:", held[0].Key() != held[1].Key())
	// Output:
	// holder 1 in
	// holder 2 in
	// holder 3 refused: true
	// distinct permits: true
}

// A fair lock is granted in request order; a TryLock cannot get past the
// waiters queued for it.
func Example_fair() {
	t := &exampleT{}
	defer t.done()
	ctx := context.Background()
	cluster := redlocktest.New(t)
	a, b := cluster.Client(), cluster.Client()

	l, _ := a.TryLock(ctx, "report:nightly", 10*time.Second, redlock.Fair())
	fmt.Println("kind:", l.Kind())
	_, err := b.TryLock(ctx, "report:nightly", 10*time.Second, redlock.Fair())
	fmt.Println("held:", errors.Is(err, redlock.ErrNotObtained))
	_ = l.Release(ctx)
	l, err = b.TryLock(ctx, "report:nightly", 10*time.Second, redlock.Fair())
	fmt.Println("free, nobody waiting:", err == nil)
	_ = l.Release(ctx)
	// Output:
	// kind: fair
	// held: true
	// free, nobody waiting: true
}
