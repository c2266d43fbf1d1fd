package redlock

import (
	"context"
	"sync"
	"time"

	"github.com/redlock-go/redlock/clock"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
)

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
	l.renewAt = int32(len(r.locks))
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
			l.ord() // before the round: see successor
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

// renewRound sends the renewals rs of the locks ls to every node at once, one
// node.ExtendMany (one round trip) each, and returns each lock's outcome
// as soon as every lock's is decided (quorum.StartBatch: each lock on its
// own quorum). Slower nodes are not waited for; their calls run on to
// their deadline, counted in c.wg so that Close waits for them. A batch's
// calls get the release deadline: it carries many locks, and no caller
// waits on it.
func (c *Client) renewRound(ls []*Lock, rs []node.Renewal, ttl time.Duration) []quorum.Outcome {
	ctx := c.ends.Within(context.Background(), c.releaseTimeout(ttl))
	cfg := quorum.Config{N: len(c.nodes), Need: c.need, Track: &c.wg, Now: c.now, Counts: c.counts(opRenew), Workers: &c.workers}
	if len(c.o.nodeObs) > 0 {
		cfg.Observe = func(i int, v quorum.Vote) { c.observeNode(ctx, opRenew, i, v) }
	}
	canSkip := c.canSkip(opRenew, c.need)
	return quorum.StartBatch(ctx, cfg, len(rs), func(ctx context.Context, i int, ok []bool, errs []error) {
		_, _, err := c.call(ctx, i, canSkip, func(ctx context.Context, i int) (int64, bool, error) {
			if err := c.beforeRenew(ctx, i, ttl); err != nil { // the restart quarantine's TTL register
				return 0, false, err
			}
			return inOrder(ctx, ls, i, func() (int64, bool, error) {
				return 0, true, c.nodes[i].ExtendMany(ctx, rs, ok, errs)
			})
		})
		if notSent(err) {
			for j := range errs {
				errs[j] = err
			}
		}
	})
}

// inOrder runs call (one node.ExtendMany carrying the renewals of ls) on
// node i after the previous extension call of each of ls there returned
// (see order); if ctx ends first it sends nothing.
func inOrder(ctx context.Context, ls []*Lock, i int, call func() (int64, bool, error)) (int64, bool, error) {
	mine := make([]chan struct{}, len(ls))
	var err error
	for j, l := range ls {
		var prev <-chan struct{}
		o := l.ordr.Load() // made before the round (ord)
		prev, mine[j] = o.enter(i)
		if err == nil {
			err = o.wait(ctx, i, prev, mine[j])
			if err != nil {
				mine[j] = nil // wait closes it after prev
			}
		} else if prev != nil {
			go func(o *order, prev <-chan struct{}, mine chan struct{}) { <-prev; o.exit(i, mine) }(o, prev, mine[j])
			mine[j] = nil
		}
	}
	defer func() {
		for j, m := range mine {
			if m != nil {
				ls[j].ordr.Load().exit(i, m) // set once, before the round
			}
		}
	}()
	if err != nil {
		return 0, false, err
	}
	return call()
}
