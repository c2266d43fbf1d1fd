package redlock

import (
	"context"
	"strconv"
	"sync"

	"github.com/redlock-go/redlock/internal/handoff"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/observe"
)

// fairRetryMax is a fair waiter's longest wait between attempts.
const fairRetryMax = fairWaiterTimeout / 10

// Fair makes the call a fair lock: waiters get the key in request order,
// across processes. A waiter first takes a ticket: the highest of a
// quorum's ticket registers, plus one; its attempts raise the registers to
// it, so a Lock call that starts after another's first attempt returned
// gets a later ticket (calls that overlap are ordered by ticket, ties by
// waiter id). Each node grants the key only to the lowest ticket it
// queues; the held lock is a plain lock (Extend, watchdog, Release as
// usual) and is never handed to a local waiter, which could have come
// later than a remote one. A waiter that gives up leaves the queue; one
// that dies loses its place after admin.FairWaiterTimeout. A Client's waiters of
// one key queue locally in ticket order and the first keeps the others'
// places. TryLock with Fair succeeds only when nobody waits. Every caller
// of the key must use Fair (a plain Lock ignores the queue). One key per
// call; no fencing. The backoff max is capped at admin.FairWaiterTimeout/10.
func Fair() LockOption { return kindOption(fair{}) }

// fair is a plain lock granted in ticket order (fair_lock.lua): never
// handed on locally (a local waiter may have come after a remote one),
// and a waiter queues, with its ticket, before its first attempt.
type fair struct{ plain }

func (fair) is() traits { return traits{kind: observe.KindFair} }

// check caps the backoff, so that a live waiter renews its place well
// within admin.FairWaiterTimeout.
func (fair) check(_ *Client, r *request) error {
	r.o.retryMax = min(r.o.retryMax, fairRetryMax)
	r.o.retryMin = min(r.o.retryMin, r.o.retryMax)
	return nil
}

func (fair) command(c *Client, r *request, _ []string, owner string) (cmd, again *node.Cmd) {
	cmd = c.fairCmd(r, owner)
	return cmd, cmd
}

func (fair) queue(ctx context.Context, w *wait) (*handoff.Turn, func(*Lock), error) {
	return w.c.fairEnter(ctx, w.r, w.key)
}

func fairKeys(key string) node.FairKeys {
	return node.FairKeys{Lock: key, Queue: "{" + key + "}:fair:queue", Places: "{" + key + "}:fair:places",
		Ticket: "{" + key + "}:fair:ticket"}
}

// fairQueues is a Client's fair waiters, per key, in ticket order.
type fairQueues struct {
	mu   sync.Mutex
	keys map[string]*fairKey
	seq  uint64
}

type fairKey struct {
	mu      sync.Mutex // guards last and waiting, and orders entries into the local queue
	last    int64      // the last ticket taken here
	waiting []node.Waiter
	refs    int // guarded by fairQueues.mu
}

func (f *fairQueues) get(key string) *fairKey {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys == nil {
		f.keys = map[string]*fairKey{}
	}
	k := f.keys[key]
	if k == nil {
		k = &fairKey{}
		f.keys[key] = k
	}
	k.refs++
	return k
}

func (f *fairQueues) put(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if k := f.keys[key]; k != nil {
		if k.refs--; k.refs == 0 {
			delete(f.keys, key)
		}
	}
}

// fairEnter takes r's ticket and queues r, locally in ticket order: the
// local queue's head then has this Client's lowest ticket. It returns the
// Turn and what to call when r leaves (with the Lock it got, or nil), or
// an error matching ErrNotObtained (and ctx's error if ctx ended it).
//
// Each waiter takes its ticket in a round of its own, holding no lock, so
// that it ends with its ctx whatever another waiter's round waits for;
// the local ticket (above the node's and every one taken here before) and
// the place in the local queue are then taken together.
func (c *Client) fairEnter(ctx context.Context, r *request, queue string) (*handoff.Turn, func(*Lock), error) {
	fk := c.fair.get(queue) // keeps fk.last while the round runs
	top, out := c.ticket(ctx, r)
	if top == 0 {
		c.fair.put(queue)
		cause := out.Err
		if cause == nil {
			cause = ctx.Err()
		}
		return nil, nil, &QuorumError{Op: "acquire", Keys: r.keys, Need: c.need, Got: out.Yes, Attempts: 1,
			Nodes: c.results(out), Err: ErrNotObtained, Cause: cause}
	}
	c.fair.mu.Lock()
	c.fair.seq++
	id := c.prefix + "w" + strconv.FormatUint(c.fair.seq, 10)
	c.fair.mu.Unlock()
	fk.mu.Lock()
	fk.last = max(top, fk.last+1)
	r.waiter = node.Waiter{ID: id, Ticket: fk.last}
	fk.waiting = append(fk.waiting, r.waiter)
	t := c.hub.EnterWant(queue, *r) // never blocks; under fk.mu, so that the local queue keeps ticket order
	fk.mu.Unlock()
	w := r.waiter
	return t, func(l *Lock) { c.fairLeave(queue, fk, w, r, l) }, nil
}

// ticket takes a ticket from a quorum's registers: the highest, or 0 with
// the round's outcome.
func (c *Client) ticket(ctx context.Context, r *request) (int64, quorum.Outcome) {
	cmd := node.FairTicket(fairKeys(r.keys[0]), 10*fairWaiterTimeout)
	out := c.round(ctx, opAcquire, r.ttl, c.need, func(ctx context.Context, i int) (int64, bool, error) {
		return c.nodes[i].DoValue(ctx, cmd)
	}).Wait(ctx)
	if !out.Reached || out.Err != nil {
		return 0, out
	}
	var top int64
	for _, v := range out.Votes {
		if v.OK && v.Value > top {
			top = v.Value
		}
	}
	return top, out
}

// fairCmd is the acquisition of r by owner: for a queued waiter, it keeps
// the places of this Client's waiters behind it.
func (c *Client) fairCmd(r *request, owner string) *node.Cmd {
	k := fairKeys(r.keys[0])
	if r.waiter.ID == "" { // a single attempt: only if nobody waits
		return node.FairLock(k, owner, r.ttl, fairWaiterTimeout, nil)
	}
	c.fair.mu.Lock()
	fk := c.fair.keys[r.keys[0]]
	c.fair.mu.Unlock()
	fk.mu.Lock()
	var ws []node.Waiter
	for i, w := range fk.waiting {
		if w.ID == r.waiter.ID {
			ws = append(ws, fk.waiting[i:]...)
			break
		}
	}
	fk.mu.Unlock()
	return node.FairLock(k, owner, r.ttl, fairWaiterTimeout, ws)
}

// fairLeave takes waiter w out of this Client's queue of the key and, in
// the background, out of the nodes' queues where its place may remain:
// every node if it gave up, else the nodes that did not grant l.
func (c *Client) fairLeave(queue string, fk *fairKey, w node.Waiter, r *request, l *Lock) {
	fk.mu.Lock()
	for i, x := range fk.waiting {
		if x.ID == w.ID {
			fk.waiting = append(fk.waiting[:i:i], fk.waiting[i+1:]...)
			break
		}
	}
	fk.mu.Unlock()
	c.fair.put(queue)
	var left uint64
	var granted []observe.NodeResult
	if l != nil {
		granted = l.Votes()
	}
	for i := range c.nodes {
		if i >= len(granted) || !granted[i].Vote {
			left |= 1 << i
		}
	}
	if left == 0 {
		return
	}
	cmd := node.FairLeave(fairKeys(r.keys[0]), w.ID)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.roundWithin(context.Background(), opRelease, c.releaseTimeout(r.ttl), len(c.nodes), func(ctx context.Context, i int) (int64, bool, error) {
			if left&(1<<i) == 0 {
				return 0, false, errNotSent
			}
			return c.nodes[i].DoValue(ctx, cmd)
		}).WaitAll()
	}()
}
