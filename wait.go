package redlock

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/redlock-go/redlock/internal/handoff"
	"github.com/redlock-go/redlock/observe"
)

// wait is one call waiting between its attempts: its backoff, the
// warning of a wait on nodes that do not answer, its turn in this
// Client's local queue of its key (package handoff) or, for several keys,
// its watch of their releases, and the pacers its lock type supplies
// (traits.pacers). One per call; not shared.
type wait struct {
	c      *Client
	r      *request
	key    string         // the local queue's key; "" for several keys
	t      *handoff.Turn  // the turn in the local queue, once entered
	leave  func(*Lock)    // what the type calls as the call leaves the queue, after the Turn
	watch  *handoff.Watch // several keys: their releases, from the first lost attempt on
	pacers []pacer        // what the type adds to the pace
	inline [2]pacer       // backing for pacers (traits.pacers)
	poll   pollForeign    // the foreign poller's state, when it is a pacer
	idle   int            // failed attempts in a row: the backoff grows with them
	d      time.Duration  // the wait before the next attempt
	woken  bool           // a release notification ended the last wait
	tried  bool           // an attempt was made before the call queued
	down   time.Time      // since when every attempt failed for want of answering nodes; zero: not so
	warned time.Time      // when that was last logged (warnDown)
}

// pacer is what a lock type adds to its waiters' pace.
type pacer interface {
	// pause is how long the head gives way, after its turn's wait,
	// before it tries (0: not at all).
	pause(w *wait) time.Duration
	// attempted sees the outcome of the head's attempt.
	attempted(w *wait, res result)
	// next returns the wait before the next attempt, d by the backoff.
	next(ctx context.Context, w *wait, d time.Duration) time.Duration
}

// pacers are the pacers of a waiter of a type with traits t: one passed
// in runs gives way to other processes (rivals.go); one whose key a
// foreign value may hold polls it (foreign.go).
// They are w's (w.inline, w.poll): a wait allocates nothing more.
func (t traits) pacers(w *wait) []pacer {
	ps := w.inline[:0]
	if t.runs {
		ps = append(ps, giveWay{})
	}
	if t.foreign {
		ps = append(ps, &w.poll)
	}
	return ps
}

// newWait is the wait of call r on c, in the local queue of key ("" for
// several keys).
func newWait(c *Client, r *request, key string) *wait {
	w := &wait{c: c, r: r, key: key}
	w.pacers = r.typ.is().pacers(w)
	return w
}

// triedFirst records a first attempt made before the call queued.
func (w *wait) triedFirst() {
	w.idle, w.d, w.tried = 1, w.c.backoff(&w.r.o, 1), true
}

// enter puts the call in its key's local queue, as its type does.
func (w *wait) enter(ctx context.Context) error {
	t, leave, err := w.r.typ.queue(ctx, w)
	if err != nil {
		return err
	}
	w.t, w.leave = t, leave
	return nil
}

// exit leaves the local queue, with the Lock the call got or nil.
func (w *wait) exit(l *Lock) {
	w.t.Leave()
	w.leave(l)
}

// turn waits for the head's next attempt on the nodes: for a wake-up or
// the backoff (Turn.Wait), then, giving way as the pacers say, until the
// next wake-up (Turn.Pause). It returns the lock this Client's holder
// passed on, if one was (it ends either wait).
func (w *wait) turn(ctx context.Context) (any, error) {
	woken, err := w.t.Wait(ctx, w.d)
	w.woken = woken
	if v := w.t.Take(); v != nil || err != nil {
		return v, err
	}
	var y time.Duration
	for _, p := range w.pacers {
		y = max(y, p.pause(w))
	}
	if y > 0 {
		err = w.t.Pause(ctx, y)
	}
	return w.t.Take(), err
}

// attempted shows the pacers the head's attempt; if it won, the local
// waiters behind it go on (at once, for a type others may hold beside it).
func (w *wait) attempted(res result) {
	for _, p := range w.pacers {
		p.attempted(w, res)
	}
	switch {
	case res.lock == nil:
	case w.r.typ.is().shared:
		w.t.LeaveShared() // local waiters may get in beside it: they try now
	default:
		w.t.LeaveHolding()
	}
}

// missed sets the wait after attempt n, which lost with res.
func (w *wait) missed(ctx context.Context, n int, res result) {
	w.warnDown(ctx, n, res)
	w.idle++ // also after a lost race: the winner's release will be announced, polls are the fallback
	w.d = w.c.backoff(&w.r.o, w.idle)
	for _, p := range w.pacers {
		w.d = p.next(ctx, w, w.d)
	}
}

// awaitRelease waits before attempt n+1 of a call on several keys (or
// without a Hub): for its backoff, or until the nodes announce the release
// of one of its keys, so that it tries as a key is freed rather than at a
// poll that seldom falls between two holds. Its error is ctx's, or
// ErrClosed once Close has begun.
func (w *wait) awaitRelease(ctx context.Context, n int) error {
	c := w.c
	if w.watch == nil && c.hub != nil {
		w.watch = c.hub.Watch(w.r.keys)
	}
	d := c.backoff(&w.r.o, n)
	if w.watch == nil {
		return c.sleep(ctx, d)
	}
	_, err := w.watch.Wait(ctx, d)
	if errors.Is(err, handoff.ErrClosed) || err == nil && c.closed.Load() {
		return ErrClosed
	}
	return err
}

// unwatch ends the watch of several keys, if any.
func (w *wait) unwatch() {
	if w.watch != nil {
		w.watch.Leave()
	}
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
func (w *wait) warnDown(ctx context.Context, n int, res result) {
	c, r := w.c, w.r
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
		w.down = time.Time{}
		return
	}
	if w.down.IsZero() {
		w.down = now
	}
	if now.Sub(w.down) < downAfter || !w.warned.IsZero() && now.Sub(w.warned) < downEvery {
		return
	}
	w.warned = now
	lg := c.o.logger
	if lg == nil {
		lg = slog.Default()
	}
	qe := c.failed(*r, n, res).err.(*QuorumError)
	t := tallyNodes(qe.Nodes)
	lg.LogAttrs(ctx, slog.LevelWarn, "redlock: still waiting: too few nodes can vote", slog.Any("keys", r.keys),
		slog.String("client", c.id), slog.Int("voters", voters), slog.Int("need", c.need),
		slog.Int("unreachable", t.unreachable), slog.Int("timed_out", t.slow), slog.Int("not_counted", t.notCounted+t.discounted),
		slog.Int("failed", t.failed), slog.Duration("for", now.Sub(w.down)), slog.Int("attempts", n), slog.String("error", qe.Error()))
}
