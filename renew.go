package redlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redlock-go/redlock/clock"
	"github.com/redlock-go/redlock/internal/node"
)

// Watchdog, passed as the TTL to Lock, TryLock, LockKeys or TryLockKeys,
// takes the lock in watchdog mode: it is acquired for the Client's lease
// (WithWatchdog, default 30 s) and renewed in the background every renewal
// interval (default lease/3) by the Extend rules (owner checked, a quorum,
// within the current validity, never re-created) until Release, until it is
// lost (Done), or until WithMaxHold is reached. A Client renews all its
// watchdog locks in one batch per interval, one round trip per node (see
// renewer). A renewal that fails because nodes failed is tried again soon,
// before the deadline, not only at the next interval. Use it when the
// work's length is unknown; use a fixed TTL when the work must not outlive
// it. It is negative so that a TTL of zero (an unset config field, a
// failed parse) is refused as ErrInvalidArgument rather than taken as a
// lock held for as long as the process lives.
const Watchdog time.Duration = -1

// ErrMaxHold: an extension or renewal would keep the lock past WithMaxHold.
// It matches ErrNotExtended; the cause of a watchdog lock that ran out
// there matches it too.
var ErrMaxHold = &maxHoldError{}

type maxHoldError struct{}

func (*maxHoldError) Error() string        { return "redlock: max hold reached" }
func (*maxHoldError) Is(target error) bool { return target == ErrNotExtended }

func isMaxHold(err error) bool { return errors.Is(err, ErrMaxHold) }

// renewer renews a Client's watchdog locks. It holds the set of locks in
// watchdog mode and one timer for the whole Client: at each tick (ticks
// are one interval apart, counted from the Client's creation) every lock
// of the set is renewed, in one batch, as one node.ExtendMany (one round
// trip) per node, so that renewing many locks costs a round trip per node
// per interval, not one per lock, and needs no timer or goroutine per lock.
// A lock joins the set when it is acquired, so its first renewal comes
// within one interval, and leaves it when it ends (end) or reaches the max
// hold. A renewal that failed because nodes failed is retried on a timer
// of the lock's own (retryIn); that retry joins the next batch to go out.
// One batch goes out at a time; locks that fall due meanwhile join the
// next one.
type renewer struct {
	epoch   time.Time // the ticks' origin
	mu      sync.Mutex
	locks   []*Lock     // the set; a Lock's renewAt is 1 + its index here
	tick    func() bool // stops the tick timer; nil when it is not armed
	next    []*Lock     // the next batch
	sending bool        // a goroutine is sending batches
	stopped bool        // Close: no more ticks
}

// add puts l in the renewal set and arms the tick. l.mu must be held.
func (r *renewer) add(c *Client, l *Lock) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l.renewAt > 0 || r.stopped {
		return
	}
	r.locks = append(r.locks, l)
	l.renewAt = len(r.locks)
	if r.tick == nil {
		r.arm(c)
	}
}

// remove takes l out of the renewal set. l.mu must be held.
func (r *renewer) remove(l *Lock) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l.renewAt == 0 {
		return
	}
	last := r.locks[len(r.locks)-1]
	r.locks[l.renewAt-1], last.renewAt = last, l.renewAt
	r.locks[len(r.locks)-1] = nil
	r.locks = r.locks[:len(r.locks)-1]
	l.renewAt = 0
}

// arm sets the timer of the next tick. r.mu must be held.
func (r *renewer) arm(c *Client) {
	r.tick = clock.AfterFunc(c.o.clock, c.o.renewEvery-r.sinceTick(c), func() { r.onTick(c) })
}

// sinceTick is the time since the last tick (due or not).
func (r *renewer) sinceTick(c *Client) time.Duration {
	return c.o.clock.Now().Sub(r.epoch) % c.o.renewEvery
}

// onTick queues every lock of the set, arms the next tick while the set
// is not empty, and sends.
func (r *renewer) onTick(c *Client) {
	r.mu.Lock()
	r.tick = nil
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.next = append(r.next, r.locks...)
	if len(r.locks) > 0 {
		r.arm(c)
	}
	r.send(c)
}

// stop ends the ticks (Close).
func (r *renewer) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	if r.tick != nil {
		r.tick()
		r.tick = nil
	}
}

// send sends the due batches on this goroutine, unless another one is
// already doing so (it then takes them). r.mu must be held; send
// releases it.
func (r *renewer) send(c *Client) {
	if r.sending {
		r.mu.Unlock()
		return
	}
	r.sending = true
	for len(r.next) > 0 {
		batch := r.next
		r.next = nil
		r.mu.Unlock()
		c.renewBatch(batch)
		r.mu.Lock()
	}
	r.sending = false
	r.mu.Unlock()
}

// due queues l for the next batch (a retried renewal) and sends.
func (r *renewer) due(l *Lock) {
	r.mu.Lock()
	r.next = append(r.next, l)
	r.send(l.c)
}

// renewBatch renews the locks of batch that may be renewed now (see
// beginRenewal) by the Extend rules, each settled on its own quorum (see
// settle: a renewal that failed because nodes failed is retried soon; one
// whose next lease would pass the max hold leaves the renewal set; a lost
// lock has ended). Its events are reported on another goroutine, after
// every turn is over, so that an observer can neither hold up the next
// batch nor wait on a turn of its own batch.
func (c *Client) renewBatch(batch []*Lock) {
	if !c.enter() {
		return // closed: the locks end at their deadlines
	}
	ctx, ttl := context.Background(), c.o.lease
	start := c.o.clock.Now()
	var evs []outcome
	ls := batch[:0]
	for _, l := range batch {
		ok, e := l.beginRenewal(ctx, start, ttl)
		evs = append(evs, e...)
		if ok {
			ls = append(ls, l)
		}
	}
	if len(ls) > 0 {
		rs := make([]node.Renewal, len(ls))
		for j, l := range ls {
			rs[j] = node.Renewal{Keys: l.keys, Owner: l.owner, TTL: ttl}
		}
		outs := c.renewRound(ls, rs, ttl)
		for j, l := range ls {
			e, _ := l.settle(ctx, opRenew, start, start, ttl, outs[j])
			evs = append(evs, e...)
		}
	}
	c.exit()
	c.reportLater(evs)
}
