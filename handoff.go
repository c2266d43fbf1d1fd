package redlock

import (
	"context"
	"time"

	"github.com/redlock-go/redlock/internal/quorum"
)

// Local hand-off: Release passes a lock to the head of this Client's
// local queue for its key (see Lock.beginRelease for when) as a new Lock
// with the same owner value and deadline, with no round trip to the nodes:
// the lock stays held on the quorum, and only its holder inside this
// process changes. Only a single key, without fencing (every holder gets
// its own token), within the run's bounds (runOver: so that other
// processes get their turn), and a waiter whose request fits.
//
// The local hand-off as Release sees it: whether the run ends (runOver),
// whether to try (mayHandOn), the offer (handOn), and after a delete on
// the nodes, waking the next local waiter (released). The successor itself
// is made by the Lock (lock.go).

// soloRuns is how many times WithLocalHandoff's run a run may last while no
// other process is seen waiting for the key.
const soloRuns = 40

// runEnds reports whether a run of passes ends at a release, after passes
// passes in a row over age, with at most n passes and, while another
// process is seen waiting (seen), at most d, else soloRuns times d; and
// whether to ask the nodes if another process waits (ask: none is seen
// and the run is past d).
func runEnds(passes, n int, age, d time.Duration, seen bool) (end, ask bool) {
	if passes >= n {
		return true, false
	}
	if seen {
		return age >= d, false
	}
	return age >= soloRuns*d, age >= d
}

// runOver reports whether the run of passes of l ends at its release:
// then l is released on the nodes, and this Client's waiters wait for the
// nodes' notification like other processes' waiters. Only types passed in
// runs are bounded in time; it may ask the nodes, in the background,
// whether another process waits (see rivals).
func (c *Client) runOver(l *Lock) bool {
	if !l.typ.is().runs || len(l.keys) != 1 {
		return int(l.passes) >= c.o.localHandoff
	}
	key := l.waitKey()
	seen := c.rivalSeen(key) || c.hub.Watched(key) // a multi-key call of this Client waits for it too
	d := max(c.o.localRun, c.runOwed(key))         // a turn as long as the foreign holders' last one (rivals.go)
	end, ask := runEnds(int(l.passes), c.o.localHandoff, l.runAge(), d, seen)
	if ask && !end && c.hub.Queued(key) {
		c.askRivals(key)
	}
	return end
}

// mayHandOn reports whether Release of l, whose run goes on, may hand it
// to a local waiter: a single key of a type passed in runs and a waiter
// queued.
func (c *Client) mayHandOn(l *Lock) bool {
	return c.hub != nil && len(l.keys) == 1 && l.typ.is().runs && c.hub.Queued(l.waitKey())
}

// handOn offers next, the successor of l, to the head of l's local queue
// and reports whether a waiter took it (l has then passed).
func (c *Client) handOn(l, next *Lock) bool {
	if !c.hub.Offer(l.waitKey(), next, next.fits, c.releaseUntaken) {
		return false
	}
	l.markPassed()
	return true
}

// released wakes this Client's next waiter of l once l was deleted on the
// nodes (deleted: on a quorum of them); once its run is over it waits for
// the nodes' notification like everyone else (at most 100 ms: a node
// renewing its subscription may miss it), and lets those that waited
// longer go first (see rivals), or, where no notification can come (the
// delete did not reach a quorum, or subscriptions are refused), for its
// own timer.
func (c *Client) released(l *Lock, deleted, over bool) {
	switch {
	case c.hub == nil || len(l.keys) != 1:
	case !over:
		c.hub.ReleasedOwner(l.waitKey(), l.owner)
	default:
		if deleted {
			c.yieldForeign(l.waitKey()) // before the wake-up: the head reads it in raceDelay
		}
		c.hub.Unheld(l.waitKey(), deleted)
	}
}

// unheld tells l's local queue that l ended without a release (lost,
// expired): the next waiter's timer runs from now, since no release will
// be announced.
func (c *Client) unheld(l *Lock) {
	if c.hub != nil && len(l.keys) == 1 {
		c.hub.Unheld(l.waitKey(), false)
	}
}

// fits reports whether a waiter's request may take l: the same mode, more
// than the minimum validity left and, for a fixed TTL, at least half of
// the TTL it asked for. Called by the Hub with its lock held.
func (l *Lock) fits(v any) bool {
	r, ok := v.(request)
	if !ok || r.watchdog != (l.renewer != nil) || r.typ != l.typ {
		return false // a fenced waiter needs a token of its own; a permit fits the same semaphore
	}
	left := l.Remaining()
	if l.renewer != nil {
		return left > l.c.o.minValidity // renewals keep it from here
	}
	return left >= r.ttl/2 && left > l.c.o.minValidity
}

// taken starts the life of a Lock passed to the waiter r (its timers, for
// a watchdog lock: the next renewal keeps the cadence of the last one) and
// returns its event: an acquisition after n attempts of that waiter.
func (c *Client) taken(r request, n int, l *Lock) outcome {
	left := l.startPassed(r.o.maxHold)
	l.mu.Lock() // a renewal started by startPassed may set them
	votes := l.roundVotes()
	l.mu.Unlock()
	return outcome{op: opAcquire, keys: l.keys, owner: l.owner, lock: l, begin: r.begin, attempts: n,
		round: quorum.Outcome{Votes: votes}, left: left, passed: true}
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
