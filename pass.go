package redlock

import (
	"context"
	"time"

	"github.com/redlock-go/redlock/handoff"
	"github.com/redlock-go/redlock/quorum"
)

// DefaultLocalHandoff is how many times in a row a lock may pass between
// waiters of one Client before it is released on the nodes (WithLocalHandoff).
const DefaultLocalHandoff = 16

// HandoffStats returns the counters of this Client's waiting Lock calls:
// how their waits ended (a node's release notification, a release by this
// Client, the previous waiter leaving, the backoff timer), locks passed
// between its waiters, and the health of its pub/sub connections. See
// package handoff.
func (c *Client) HandoffStats() handoff.Stats { return c.hub.Stats() }

// passOn hands the just-released Lock l to the head of this Client's local
// queue for its key, as a new Lock with the same owner value and deadline,
// with no round trip to the nodes: the lock stays held on the quorum, and
// only its holder inside this process changes. It does so only for a
// single key, a waiter whose request fits (same mode; for a fixed TTL, at
// least half of it left), and fewer than WithLocalHandoff passes in a row,
// so that other processes get their turn. It reports whether l was handed.
func (l *Lock) passOn() bool {
	c := l.c
	if c.hub == nil || len(l.keys) != 1 || l.passes >= c.o.localHandoff || l.token != 0 {
		return false
	}
	if !c.hub.Queued(l.keys[0]) { // the usual case: no waiter, and no successor to build
		return false
	}
	next := l.successor()
	return c.hub.Offer(l.keys[0], next, next.fits, c.releaseUntaken)
}

// successor is a fresh Lock for the same hold.
func (l *Lock) successor() *Lock {
	l.mu.Lock() // an Extend that was already under way may still move the deadline
	defer l.mu.Unlock()
	n := &Lock{c: l.c, keys: l.keys, owner: l.owner, won: l.won, acquired: l.c.o.clock.Now(), watchdog: l.watchdog,
		passes: l.passes + 1, ttl: l.ttl, deadline: l.deadline}
	n.setVotes(l.votes)
	return n
}

// fits reports whether a waiter's request may take l. Called by the Hub
// with its lock held.
func (l *Lock) fits(v any) bool {
	r, ok := v.(request)
	if !ok || r.watchdog != l.watchdog {
		return false
	}
	if l.watchdog {
		return true // renewals keep it
	}
	left := l.Remaining()
	return left >= r.ttl/2 && left > l.c.o.minValidity
}

// taken starts the life of a Lock passed to the waiter r (its timers, for
// a watchdog lock: the next renewal keeps the cadence of the last one) and
// reports it as an acquisition after n attempts of that waiter.
func (c *Client) taken(ctx context.Context, r request, n int, l *Lock) *Lock {
	l.mu.Lock()
	if l.watchdog {
		l.armExpiry()
		validity := l.ttl - DriftBudget(l.ttl, c.o.driftFactor)
		next := l.deadline.Add(-(validity - c.o.renewEvery)).Sub(c.o.clock.Now())
		c.renewer.add(c, l)
		if c.o.renewEvery-c.renewer.sinceTick(c) > next {
			l.scheduleRetry(max(next, 0)) // the next tick would come later than the last renewal's cadence
		}
	}
	left := l.remaining()
	l.mu.Unlock()
	c.report(ctx, outcome{op: opAcquire, keys: l.keys, owner: l.owner, lock: l, begin: r.begin, attempts: n,
		round: quorum.Outcome{Votes: l.votes}, left: left, passed: true})
	return l
}

// releaseUntaken releases, in the background, a Lock that was handed on
// but that no waiter took (they all left). The Hub calls it without
// blocking; Close waits for it.
func (c *Client) releaseUntaken(v any) {
	l := v.(*Lock)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = l.Release(ctx)
	}()
}
