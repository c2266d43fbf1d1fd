package redlocktest_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe"
	"github.com/redlock-go/redlock/redlocktest"
)

// reserveSeat is the code under test: it books seat only while it holds
// the seat's lock, and gives up if the lock is lost before it commits.
func reserveSeat(ctx context.Context, c *redlock.Client, seat string, work func()) error {
	l, err := c.TryLock(ctx, "seat:"+seat, 10*time.Second)
	if errors.Is(err, redlock.ErrNotObtained) {
		return fmt.Errorf("seat %s is being booked by someone else", seat)
	}
	if err != nil {
		return err
	}
	defer l.Release(context.Background())
	work()
	if err := l.Extend(ctx, 10*time.Second); err != nil { // still ours? then commit
		return fmt.Errorf("seat %s: lock lost before commit: %w", seat, err)
	}
	return nil // commit the booking here
}

// TestReserveSeat tests reserveSeat's locking: contention, the lock lost
// mid-work, and the lock expiring mid-work.
func TestReserveSeat(t *testing.T) {
	ctx := context.Background()
	cluster := redlocktest.New(t)
	c := cluster.Client()

	hold := cluster.Hold("seat:12A", 10*time.Second) // another process books 12A
	if err := reserveSeat(ctx, c, "12A", func() {}); err == nil {
		t.Fatal("booked a seat held by another process")
	}
	hold.Release(ctx)
	if err := reserveSeat(ctx, c, "12A", func() {}); err != nil {
		t.Fatalf("free seat: %v", err)
	}

	err := reserveSeat(ctx, c, "12B", func() { cluster.Lose("seat:12B") })
	if !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("lock lost mid-work: %v, want ErrLockLost", err)
	}
	err = reserveSeat(ctx, c, "12C", func() { cluster.Advance(11 * time.Second) })
	if !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("lock expired mid-work: %v, want ErrLockLost", err)
	}
}

// exampleT stands in for the *testing.T of a test, which an Example does
// not have; in a test, pass t to New.
type exampleT struct {
	testing.TB
	cleanups []func()
}

func (e *exampleT) Helper()                           {}
func (e *exampleT) Cleanup(f func())                  { e.cleanups = append(e.cleanups, f) }
func (e *exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (e *exampleT) done() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
}

func Example() {
	t := &exampleT{} // in a test: t *testing.T
	defer t.done()
	ctx := context.Background()
	cluster := redlocktest.New(t)
	a, b := cluster.Client(), cluster.Client() // two processes

	l, _ := a.TryLock(ctx, "report", 10*time.Second)
	_, err := b.TryLock(ctx, "report", 10*time.Second)
	fmt.Println("contended:", errors.Is(err, redlock.ErrNotObtained))

	cluster.Advance(5 * time.Second)
	fmt.Println("held after 5s:", l.Err() == nil)
	cluster.Advance(6 * time.Second)
	<-l.Done()
	fmt.Println("lost after 11s:", errors.Is(l.Err(), redlock.ErrLockLost))

	l, err = b.TryLock(ctx, "report", redlock.Watchdog)
	fmt.Println("b takes it:", err == nil)
	cluster.Advance(time.Minute) // renewed every 10s
	fmt.Println("watchdog lock held after a minute:", l.Err() == nil)
	cluster.Lose("report")
	cluster.Advance(10 * time.Second) // the next renewal finds it gone
	<-l.Done()
	fmt.Println("lost:", errors.Is(l.Err(), redlock.ErrLockLost))
	// Output:
	// contended: true
	// held after 5s: true
	// lost after 11s: true
	// b takes it: true
	// watchdog lock held after a minute: true
	// lost: true
}

// Advance returns once the losses it caused are delivered: Done closed,
// Err and the Context's cause set, observers told. The context that ends
// at the lock's deadline on the test's clock is l.Context(): l.Deadline()
// is on that clock too (in 2030), so context.WithDeadline(ctx,
// l.Deadline()) would wait years of real time.
func ExampleCluster_Advance() {
	t := &exampleT{} // in a test: t *testing.T
	defer t.done()
	ctx := context.Background()
	cluster := redlocktest.New(t)
	var lost atomic.Int32
	c := cluster.Client(redlock.WithObserver(func(e observe.Event) {
		if e.Op == observe.OpLost {
			lost.Add(1)
		}
	}))

	l, _ := c.TryLock(ctx, "report", 10*time.Second)
	work := l.Context() // ends at the deadline on the cluster's clock, and at any other loss
	cluster.Advance(11 * time.Second)
	select { // no sleep, no polling
	case <-l.Done():
		fmt.Println("done: closed")
	default:
		fmt.Println("done: open")
	}
	fmt.Println("work:", work.Err())
	fmt.Println("cause:", context.Cause(work))
	fmt.Println("lost events:", lost.Load())

	// The README's pattern in code under test: its WithDeadline never
	// fires here, but AfterFunc ends work at the fake deadline, on a
	// goroutine of its own: wait for it, do not poll it.
	l, _ = c.TryLock(ctx, "report", 10*time.Second)
	work, cancel := context.WithDeadline(ctx, l.Deadline())
	defer cancel()
	stop := context.AfterFunc(l.Context(), cancel)
	defer stop()
	cluster.Advance(11 * time.Second)
	<-work.Done()
	fmt.Println("pattern's work:", work.Err())
	// Output:
	// done: closed
	// work: context canceled
	// cause: redlock: lock lost: ["report"]: the validity ran out before a renewal succeeded
	// lost events: 1
	// pattern's work: context canceled
}
