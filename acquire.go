package redlock

import (
	"context"
	"errors"
	"time"

	"github.com/redlock-go/redlock/internal/handoff"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
)

// request is one Lock, TryLock, LockKeys or TryLockKeys call.
type request struct {
	keys     []string
	ttl      time.Duration // the lease in watchdog mode
	o        callOptions   // the Client's, with the call's LockOptions
	typ      lockType      // the lock's type, picked from o (kinds.go)
	watchdog bool
	retry    bool
	begin    time.Time
	hold     string         // a reentrant entry: the hold it enters (kind_reentrant.go)
	waiter   node.Waiter    // a queued fair waiter (kind_fair.go)
	decided  quorum.Outcome // the last round not cut short by ctx (failed)
}

// result is the end of one attempt: the Lock if it won, else its round's
// outcome, the validity it had left and why it may not be retried.
type result struct {
	lock     *Lock
	owner    string
	out      quorum.Outcome
	validity time.Duration
	cause    error   // ctx's error, ErrClosed, or nil (refused: may retry)
	ev       outcome // the acquisition's event, when it won
}

func (c *Client) acquire(ctx context.Context, keys []string, ttl time.Duration, retry bool, opts []LockOption) (*Lock, error) {
	if ctx == nil {
		return nil, invalid("nil context")
	}
	r := &request{ttl: ttl, retry: retry, o: c.o.callOptions} // one per call: every attempt shares it
	for _, opt := range opts {
		if opt == nil {
			return nil, invalid("nil option")
		}
		opt.applyCall(&r.o)
	}
	if err := r.o.validate(); err != nil {
		return nil, err
	}
	if err := c.checkKeys(keys); err != nil {
		return nil, err
	}
	r.keys = append([]string(nil), keys...)
	var err error
	if r.typ, err = pickType(&r.o, keys, c.o.fencing); err != nil {
		return nil, err
	}
	if err := r.typ.check(c, r); err != nil {
		return nil, err
	}
	if p := LockFrom(ctx); p != nil && p.c == c {
		if err := r.enterParent(p); err != nil {
			return nil, err
		}
	}
	if r.watchdog = ttl == Watchdog; r.watchdog {
		r.ttl = c.o.lease
	}
	if err := c.checkTTL(r.ttl); err != nil {
		return nil, err
	}
	if !c.enter() {
		return nil, ErrClosed
	}
	r.begin = c.o.clock.Now()
	ev := c.acquireEntered(ctx, r)
	ev.kind = r.typ.is().kind
	c.exit()
	c.report(ctx, ev)
	return ev.lock, ev.err
}

// acquireEntered is acquire once the call entered the Client: it returns
// the acquisition's event (Lock or error), reported by acquire once the
// call has left, so that an observer may call anything, Close included.
func (c *Client) acquireEntered(ctx context.Context, r *request) outcome {
	if err := ctx.Err(); err != nil { // no traffic for a call that is already over
		return c.failed(*r, 0, result{cause: err})
	}
	if r.retry && len(r.keys) == 1 {
		return c.queued(ctx, r, r.queue())
	}
	w := newWait(c, r, "")
	defer w.unwatch()
	for n := 1; ; n++ {
		res, err := c.attemptN(ctx, r, n)
		switch {
		case err != nil:
			return outcome{op: opAcquire, keys: r.keys, begin: r.begin, err: err}
		case res.lock != nil:
			return res.ev
		case !r.retry || n == r.o.maxAttempts || res.cause != nil:
			return c.failed(*r, n, res)
		}
		w.warnDown(ctx, n, res)
		if res.cause = w.awaitRelease(ctx, n); res.cause != nil {
			return c.failed(*r, n, res)
		}
	}
}

// queued is Lock of one key: the caller waits in the key's local queue
// (package handoff), so that only the head of this Client's waiters
// contends on the nodes; between its attempts the head waits for a release
// notification or its backoff, whichever comes first (see wait), and a
// lock released by another waiter of this Client may be handed to it
// directly.
//
// With no local waiter queued, it first makes one attempt without
// queueing: an uncontended Lock costs one round and no subscription.
func (c *Client) queued(ctx context.Context, r *request, queue string) (ev outcome) {
	w := newWait(c, r, queue)
	var res result
	n := 0 // attempts
	if r.typ.is().tryFirst && !c.hub.Queued(queue) {
		n = 1
		var err error
		res, err = c.attemptN(ctx, r, n)
		switch {
		case err != nil:
			return outcome{op: opAcquire, keys: r.keys, begin: r.begin, err: err}
		case res.lock != nil:
			return res.ev
		case n == r.o.maxAttempts || res.cause != nil:
			return c.failed(*r, n, res)
		}
		w.triedFirst()
	}
	if err := w.enter(ctx); err != nil {
		return outcome{op: opAcquire, keys: r.keys, begin: r.begin, attempts: 1, err: err}
	}
	defer func() { w.exit(ev.lock) }()
	for {
		v, err := w.turn(ctx)
		if v != nil {
			w.t.LeaveHolding()
			return c.taken(*r, n, v.(*Lock))
		}
		if err != nil {
			if errors.Is(err, handoff.ErrClosed) {
				err = ErrClosed
			}
			res.cause = err
			return c.failed(*r, n, res)
		}
		n++
		if res, err = c.attemptN(ctx, r, n); err != nil {
			return outcome{op: opAcquire, keys: r.keys, begin: r.begin, err: err}
		}
		w.attempted(res)
		switch {
		case res.lock != nil:
			return res.ev
		case n == r.o.maxAttempts || res.cause != nil:
			return c.failed(*r, n, res)
		}
		w.missed(ctx, n, res)
	}
}

// attemptN makes attempt n of r: the Lock if it won (with its event),
// else the failed round, undone.
func (c *Client) attemptN(ctx context.Context, r *request, n int) (result, error) {
	return r.typ.attempt(ctx, c, r, n)
}

// attemptKeys makes attempt n of r on keys.
func (c *Client) attemptKeys(ctx context.Context, r *request, keys []string, n int) (result, error) {
	at, out, err := c.try(ctx, r, keys)
	if err != nil {
		return result{}, err
	}
	a := &at // stays on the stack: nothing keeps it past this call
	if out.Err == nil {
		r.decided = out
	}
	res := result{owner: a.owner, out: out, cause: out.Err}
	if res.cause == nil && !out.Reached {
		res.cause = r.typ.refused(out) // not retried: nothing was written
	}
	open := res.cause == nil && !out.Reached // lost: unless incurable, a retry may win
	if open && refusedByHolder(out) && !c.hub.Holds(keys[0]) {
		c.sample(keys[0]) // is it held by another library? (foreign.go); not when this process holds it
	}
	if out.Reached && res.cause == nil {
		a.token, res.out = r.typ.won(ctx, c, r, keys, a.owner, out)
	}
	res.validity = r.ttl - c.o.clock.Now().Sub(a.start) - driftBudget(r.ttl, c.o.driftFactor)
	if res.cause == nil && c.closed.Load() {
		res.cause = ErrClosed // Close has begun: hand out nothing, undo the round
	}
	if res.out.Reached && res.cause == nil && res.validity > c.o.minValidity {
		res.lock = c.newLock(r, keys, a, out)
		res.ev = outcome{op: opAcquire, keys: keys, owner: a.owner, lock: res.lock, begin: r.begin, attempts: n, round: out,
			left: res.lock.Remaining()}
		return res, nil
	}
	if res.cause == nil {
		res.cause = ctx.Err()
	}
	c.undo(ctx, keys, r.ttl, a)
	if open { // after the undo: the nodes that answered are cleaned up meanwhile
		if err := c.incurable(ctx, a.round, &res.out); err != nil {
			res.cause = err
		}
	}
	return res, nil
}

// incurable returns why no retry of a lost round can reach the quorum:
// so many nodes refused in a way the same command meets again (an ACL
// without a command or key, a wrong password, a command the server does
// not have: node.Incurable) that the others cannot make a quorum. Such a
// call ends at once, with that refusal, instead of retrying until its ctx
// ends. It counts every node's answer, those that came after the round
// was decided included: while the nodes yet to answer could still make
// the refusals too many, it waits for them (each call ends at its node
// deadline), until ctx is done. nil if a retry may win. When it returns
// the refusal, out (the round's outcome) shows the late ones too.
func (c *Client) incurable(ctx context.Context, round *quorum.Round, out *quorum.Outcome) error {
	var ie *incurableError
	var votes []quorum.Vote
	late := 0
	round.Until(ctx, func(answers []quorum.Vote, arrived []bool) bool {
		k, pending := 0, 0
		var first error
		for i, v := range answers {
			switch {
			case !arrived[i]:
				pending++
			case node.Incurable(v.Err):
				k++
				if first == nil {
					first = v.Err
				}
			}
		}
		if len(answers)-k < c.need {
			ie = &incurableError{refused: k, nodes: len(answers), first: first}
			votes, late = lateRefusals(out.Votes, answers, arrived)
			return true
		}
		return len(answers)-k-pending >= c.need // curable whatever they answer
	})
	if ie == nil {
		return nil
	}
	out.Votes, out.Failed = votes, out.Failed+late
	return ie
}

// lateRefusals returns a copy of a round's votes at its decision with the
// refusals that no retry changes which came after it (answers, where
// arrived) in place of their pending votes, and how many it put in.
func lateRefusals(votes, answers []quorum.Vote, arrived []bool) ([]quorum.Vote, int) {
	all := append([]quorum.Vote(nil), votes...)
	n := 0
	for i, v := range votes {
		if !v.Done && arrived[i] && node.Incurable(answers[i].Err) {
			all[i] = answers[i]
			n++
		}
	}
	return all, n
}

// failed returns the event of a request that fails after n attempts, the
// last of which was res.
func (c *Client) failed(r request, n int, res result) outcome {
	out := res.out
	if out.Err != nil && !out.Reached && r.decided.Votes != nil {
		// A round cut short by ctx knows little of its nodes (not
		// waited for); the last round that was decided says why the
		// call never won.
		out = r.decided
	}
	qe := &QuorumError{Op: "acquire", Keys: r.keys, Need: c.need, Got: out.Yes, Attempts: n,
		Err: ErrNotObtained, Cause: res.cause}
	if n > 0 {
		qe.Nodes = c.results(out)
		if out.Reached {
			qe.Validity = res.validity
		}
	}
	return outcome{op: opAcquire, keys: r.keys, owner: res.owner, begin: r.begin, attempts: n, round: res.out, err: qe}
}
