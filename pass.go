package redlock

import (
	"context"
	"time"

	"github.com/redlock-go/redlock/internal/handoff"
	"github.com/redlock-go/redlock/internal/quorum"
)

// HandoffStats counts this Client's waiting Lock calls: how their waits
// ended (a node's release notification, a release by this Client, the
// previous waiter leaving, the backoff timer), locks passed between its
// waiters, and the health of its pub/sub connections.
type HandoffStats = handoff.Stats

// Stats is what a Client has seen so far (Client.Stats).
type Stats struct {
	Handoff    HandoffStats    // waiting Lock calls and local hand-offs
	Quarantine QuarantineStats // the restart quarantine; zero when it is off
	Drift      DriftStats      // the drift monitor; zero when it is off
}

// Stats returns what the Client has seen so far. It is safe for concurrent
// use and sends nothing.
func (c *Client) Stats() Stats {
	return Stats{Handoff: c.hub.Stats(), Quarantine: c.quarantineStats(), Drift: c.driftStats()}
}

// Local hand-off: Release passes a lock to the head of this Client's
// local queue for its key (see Lock.beginRelease for when) as a new Lock
// with the same owner value and deadline, with no round trip to the nodes:
// the lock stays held on the quorum, and only its holder inside this
// process changes. Only a single key, without fencing (every holder gets
// its own token), fewer than WithLocalHandoff passes in a row (so that
// other processes get their turn), and a waiter whose request fits.
//
// fits reports whether a waiter's request may take l: the same mode, more
// than the minimum validity left and, for a fixed TTL, at least half of
// the TTL it asked for. Called by the Hub with its lock held.
func (l *Lock) fits(v any) bool {
	r, ok := v.(request)
	if !ok || r.watchdog != l.watchdog || r.o.fencing || r.o.kind != l.kind {
		return false // a fenced waiter needs a token of its own; a permit fits the same semaphore
	}
	left := l.Remaining()
	if l.watchdog {
		return left > l.c.o.minValidity // renewals keep it from here
	}
	return left >= r.ttl/2 && left > l.c.o.minValidity
}

// taken starts the life of a Lock passed to the waiter r (its timers, for
// a watchdog lock: the next renewal keeps the cadence of the last one) and
// returns its event: an acquisition after n attempts of that waiter.
func (c *Client) taken(r request, n int, l *Lock) outcome {
	left := l.startPassed(r.o.maxHold)
	return outcome{op: opAcquire, keys: l.keys, owner: l.owner, lock: l, begin: r.begin, attempts: n,
		round: quorum.Outcome{Votes: l.votes}, left: left, passed: true}
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
