package redlock

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/redlock-go/redlock/internal/handoff"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/observe"
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
	down     time.Time      // since when every attempt failed for want of answering nodes; zero: not so
	warned   time.Time      // when that was last logged (warnDown)
	hold     string         // a reentrant entry: the hold it enters (kind_reentrant.go)
	waiter   node.Waiter    // a queued fair waiter (kind_fair.go)
	held     holding        // the waited-for key as last read (foreignWait)
	tried    bool           // made an attempt before it queued (queued)
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
	ev.kind = r.typ.kind()
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
	var w *handoff.Watch // from the first lost attempt on
	defer func() {
		if w != nil {
			w.Leave()
		}
	}()
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
		c.warnDown(ctx, r, n, res)
		if w == nil && c.hub != nil {
			w = c.hub.Watch(r.keys)
		}
		if res.cause = c.awaitRelease(ctx, w, c.backoff(&r.o, n)); res.cause != nil {
			return c.failed(*r, n, res)
		}
	}
}

// awaitRelease waits before the next attempt of a call that waits for
// several keys (or without a Hub): for d, or until the nodes announce the
// release of one of its keys (w, if not nil), so that it tries as the
// key is freed rather than at a poll that seldom falls between two holds.
// Its error is ctx's, or ErrClosed once Close has begun.
func (c *Client) awaitRelease(ctx context.Context, w *handoff.Watch, d time.Duration) error {
	if w == nil {
		return c.sleep(ctx, d)
	}
	_, err := w.Wait(ctx, d)
	if errors.Is(err, handoff.ErrClosed) || err == nil && c.closed.Load() {
		return ErrClosed
	}
	return err
}

// queued is Lock of one key: the caller waits in the key's local queue
// (package handoff), so that only the head of this Client's waiters
// contends on the nodes; between its attempts the head waits for a release
// notification or its backoff, whichever comes first, and a lock released
// by another waiter of this Client may be handed to it directly.
//
// With no local waiter queued, it first makes one attempt without
// queueing: an uncontended Lock costs one round and no subscription.
func (c *Client) queued(ctx context.Context, r *request, queue string) (ev outcome) {
	var res result
	var d time.Duration
	n, idle := 0, 0 // attempts; failed ones in a row (the backoff grows with them)
	if r.typ.tryFirst() && !c.hub.Queued(queue) {
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
		idle, d = 1, c.backoff(&r.o, 1)
		r.tried = true
	}
	t, leave, err := r.typ.queue(ctx, c, r)
	if err != nil {
		return outcome{op: opAcquire, keys: r.keys, begin: r.begin, attempts: 1, err: err}
	}
	defer func() { leave(ev.lock) }() // after Leave
	defer t.Leave()
	for {
		woken, v, err := c.awaitTurn(ctx, t, d, queue, r.typ)
		if v != nil {
			t.LeaveHolding()
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
		c.raced(queue, r.typ, res.lock != nil, woken, res.out.Votes)
		if res.lock != nil {
			if r.typ.shared() {
				t.LeaveShared() // local waiters may get in beside it: they try now
			} else {
				t.LeaveHolding()
			}
			return res.ev
		}
		if n == r.o.maxAttempts || res.cause != nil {
			return c.failed(*r, n, res)
		}
		c.warnDown(ctx, r, n, res)
		idle++ // also after a lost race: the winner's release will be announced, polls are the fallback
		d = c.backoff(&r.o, idle)
		if r.typ.kind() == observe.KindPlain {
			d = c.foreignWait(ctx, r, r.keys[0], woken, d) // a foreign holder publishes no release
		}
	}
}

// awaitTurn waits for the head's next attempt on the nodes: for a wake-up
// or d (Turn.Wait), then, giving way to other processes, raceDelay or
// until the next wake-up (Turn.Pause). It
// returns whether a wake-up ended the first wait, and the lock this
// Client's holder passed on, if one was (it ends either wait).
func (c *Client) awaitTurn(ctx context.Context, t *handoff.Turn, d time.Duration, key string, typ lockType) (woken bool, v any, err error) {
	woken, err = t.Wait(ctx, d)
	if v = t.Take(); v != nil || err != nil {
		return woken, v, err
	}
	if y := c.raceDelay(key, typ); y > 0 {
		err = t.Pause(ctx, y)
	}
	return woken, t.Take(), err
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

// downAfter is how long a Lock call waits on nodes that do not answer
// before it says so (warnDown); downEvery, how often it says so again.
const (
	downAfter = time.Second
	downEvery = 30 * time.Second
)

// warnDown logs, at Warn, a waiting call whose attempts have failed for
// downAfter because too few nodes could vote (unreachable, timed out,
// quarantined or otherwise not counted: not a key held by someone else),
// with how many of each and each node's clause; again every downEvery
// while it lasts. It goes to the Client's logger, or to slog.Default
// without one: a Lock on dead nodes must not wait in silence.
func (c *Client) warnDown(ctx context.Context, r *request, n int, res result) {
	voters := 0
	for i, v := range res.out.Votes {
		switch {
		case v.Err == nil && !v.Discounted:
			voters++ // a yes or a no that counts: the node is up
		case errors.Is(v.Err, observe.ErrPending) && c.discount(i) == nil:
			voters++ // not waited for, and nothing known against it
		}
	}
	now := c.o.clock.Now()
	if voters >= c.need || len(res.out.Votes) == 0 {
		r.down = time.Time{}
		return
	}
	if r.down.IsZero() {
		r.down = now
	}
	if now.Sub(r.down) < downAfter || !r.warned.IsZero() && now.Sub(r.warned) < downEvery {
		return
	}
	r.warned = now
	lg := c.o.logger
	if lg == nil {
		lg = slog.Default()
	}
	qe := c.failed(*r, n, res).err.(*QuorumError)
	t := tallyNodes(qe.Nodes)
	lg.LogAttrs(ctx, slog.LevelWarn, "redlock: still waiting: too few nodes can vote", slog.Any("keys", r.keys),
		slog.String("client", c.id), slog.Int("voters", voters), slog.Int("need", c.need),
		slog.Int("unreachable", t.unreachable), slog.Int("timed_out", t.slow), slog.Int("not_counted", t.notCounted+t.discounted),
		slog.Int("failed", t.failed), slog.Duration("for", now.Sub(r.down)), slog.Int("attempts", n), slog.String("error", qe.Error()))
}
