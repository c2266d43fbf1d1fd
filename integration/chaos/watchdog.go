package chaos

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/clock"
	"github.com/redlock-go/redlock/observe"
)

// The watchdog workload: every lock is taken with redlock.Watchdog (a
// lease of Spec.Lease renewed every Spec.Every) and held for longer than
// the lease, so it survives only through its renewals. The holder reads the
// counter when it gets the lock, waits out its hold, and writes counter+1
// at the end, unless the lock ended first: it stops touching the resource
// as soon as Done fires (the Lock's Context, or Run's ctx).
//
// Its recorded interval is [acquired, min(Release called, deadline)] where
// the deadline is the lock's Deadline() read after the lock ended: each
// renewal moves it, and once the lock ended (released or lost) it no
// longer moves. A lock lost by running out of validity ends at that
// deadline; one that a renewal found gone before its deadline keeps the
// deadline it had, the end of the validity the library had promised, so the
// checker is the strict one.

// watch observes one Client: when and which lock it acquired last (the
// handle Run does not give its function) and the successful renewals of
// each lock.
type watch struct {
	mu     sync.Mutex
	last   *redlock.Lock
	at     int64 // Mono when the last acquisition was reported
	renews map[*redlock.Lock]int
}

func newWatch() *watch { return &watch{renews: map[*redlock.Lock]int{}} }

// observe is the Client's observer. It runs on the goroutine of the call,
// before Lock returns for an acquisition.
func (w *watch) observe(e observe.Event) {
	switch {
	case e.Op == "acquire" && e.Err == nil:
		at := Mono()
		l, _ := e.Lock.(*redlock.Lock)
		w.mu.Lock()
		w.last, w.at = l, at
		w.mu.Unlock()
	case e.Op == "renew" && e.Err == nil:
		l, _ := e.Lock.(*redlock.Lock)
		w.mu.Lock()
		w.renews[l]++
		w.mu.Unlock()
	}
}

// acquired returns the last lock acquired and when.
func (w *watch) acquired() (*redlock.Lock, int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last, w.at
}

// renewals returns and forgets the successful renewals of l. Call it after
// Release returned: Release waits for a renewal in flight, and none starts
// after it.
func (w *watch) renewals(l *redlock.Lock) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.renews[l]
	delete(w.renews, l)
	return n
}

// monoAt converts a time on the client's clock to Mono nanoseconds.
func monoAt(t time.Time, clk clock.Clock, rate float64) int64 {
	return Mono() + int64(float64(t.Sub(clk.Now()))/rate)
}

// holdWatchdog takes key in watchdog mode (by Lock and Release, or by Run
// if s.UseRun), holds it for a random HoldMin..Hold and returns its record;
// ok is false if the lock was not acquired.
func holdWatchdog(ctx context.Context, s Spec, lc *redlock.Client, ctr *redis.Client, key string, rng *mrand.Rand,
	clk clock.Clock, rate float64, w *watch) (r Record, ok bool, err error) {
	hold := s.HoldMin + time.Duration(rng.Int64N(int64(s.Hold-s.HoldMin)+1))
	r = Record{Client: s.Client, Key: key, Call: Mono()}
	var l *redlock.Lock
	if s.UseRun {
		// Run blocks until it has the lock or the run is over; fn's ctx
		// ends when the lock is lost (or the run is over).
		err = lc.Run(ctx, key, func(lctx context.Context) error {
			l, r.Acq = w.acquired()
			r.Wrote = watchdogRMW(lctx, nil, ctr, key, l, hold, s.Lease/2)
			r.Lost = l.Err() != nil
			r.RelCall = Mono()
			return nil
		})
		r.RelRet = Mono()
		if l == nil { // fn never ran
			return r, false, fatal(err)
		}
	} else {
		actx, acancel := context.WithTimeout(ctx, 2*s.TTL)
		l, err = lc.Lock(actx, key, redlock.Watchdog)
		acancel()
		if err != nil {
			return r, false, fatal(err)
		}
		r.Acq = Mono()
		r.Wrote = watchdogRMW(l.Context(), ctx.Done(), ctr, key, l, hold, s.Lease/2)
		r.Lost = l.Err() != nil
		r.RelCall = Mono()
		_ = l.Release(context.Background())
		r.RelRet = Mono()
	}
	r.Renews = w.renewals(l)
	r.Valid = monoAt(l.Deadline(), clk, rate) // the lock has ended: its deadline no longer moves
	return r, true, nil
}

// fatal keeps the errors that end the workload.
func fatal(err error) error {
	if errors.Is(err, redlock.ErrInvalidArgument) || errors.Is(err, redlock.ErrClosed) {
		return err
	}
	return nil
}

// watchdogRMW is the lock-protected read-modify-write of a watchdog hold:
// read the counter, wait hold while the lock is renewed, write counter+1.
// It gives up, writing nothing, as soon as the lock ends (lctx, its Done)
// or the run is over (stop), and does not start the write with less than
// margin of validity left: the write itself takes time, as a fixed-TTL
// hold is kept short next to its TTL.
func watchdogRMW(lctx context.Context, stop <-chan struct{}, ctr *redis.Client, key string, l *redlock.Lock, hold, margin time.Duration) bool {
	bg := context.WithoutCancel(lctx)
	v, err := ctr.Get(bg, CounterKey(key)).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false
	}
	t := time.NewTimer(hold)
	defer t.Stop()
	select {
	case <-t.C:
	case <-lctx.Done():
		return false
	case <-stop:
		return false
	}
	if lctx.Err() != nil || l.Remaining() < margin {
		return false
	}
	return ctr.Set(bg, CounterKey(key), strconv.FormatInt(v+1, 10), 0).Err() == nil
}

// watchdogStats sums a watchdog run: successful renewals, holds whose
// interval outlived the lease (only renewals can carry a lock past it),
// locks lost while held, increments written.
func watchdogStats(recs []Record, lease time.Duration) (renewals, pastLease, losses, wrote int) {
	for _, r := range recs {
		renewals += r.Renews
		if r.End()-r.Acq > int64(lease) {
			pastLease++
		}
		if r.Lost {
			losses++
		}
		if r.Wrote {
			wrote++
		}
	}
	return
}

// WatchdogTable renders the watchdog rows of rs ("" if none).
func WatchdogTable(rs []Result) string {
	var b strings.Builder
	for _, r := range rs {
		if r.Lease <= 0 {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\nWatchdog scenarios: locks taken with redlock.Watchdog and held past their lease\n\n")
			b.WriteString("| scenario | backend | seed | lease / renewal | acquisitions | renewals | holds past the lease | lost while held | increments written | verdict |\n")
			b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %v / %v | %d | %d | %d | %d | %d | %s |\n",
			r.Scenario, r.Backend, r.Seed, r.Lease, r.Every, r.Acquisitions, r.Renewals, r.PastLease, r.Losses, r.Wrote, r.Verdict())
	}
	return b.String()
}
