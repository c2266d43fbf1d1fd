package redlock

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/observe"
)

// A *Lock is what observe.Event.Lock holds.
var _ observe.Lock = (*Lock)(nil)

// op is observe.Op inside the package, small enough to sit in every outcome.
type op uint8

const (
	opAcquire op = iota // Lock, TryLock, LockKeys, TryLockKeys
	opExtend            // Extend
	opRenew             // a watchdog renewal
	opRelease           // Release, and the clean-up of a failed attempt
	opLost              // the lock ended without Release: see Lock.Done
)

func (o op) String() string { return string(o.pub()) }

// pub is o's observe.Op.
func (o op) pub() observe.Op {
	switch o {
	case opAcquire:
		return observe.OpAcquire
	case opExtend:
		return observe.OpExtend
	case opRenew:
		return observe.OpRenew
	case opRelease:
		return observe.OpRelease
	}
	return observe.OpLost
}

// outcome is what report logs and hands to the observers.
type outcome struct {
	op       op
	keys     []string
	owner    string
	lock     *Lock // nil when an acquisition failed
	begin    time.Time
	attempts int
	round    quorum.Outcome
	err      error
	left     time.Duration
	passed   bool
	logOnly  bool         // only logged, not handed to the observers (an internal error on an ended Lock)
	kind     observe.Kind // of a failed acquisition (else the Lock's)
}

// reportLater reports evs in order on a goroutine of their own, one at a
// time per Client (events); background work (renewals) uses it, so that an
// observer neither holds it up nor waits on it.
func (c *Client) reportLater(evs []outcome) {
	if len(evs) == 0 {
		return
	}
	e := &c.events
	e.mu.Lock()
	e.queue = append(e.queue, evs...)
	if e.running {
		e.mu.Unlock()
		return
	}
	e.running = true
	e.mu.Unlock()
	go func() {
		for {
			e.mu.Lock()
			batch := e.queue
			e.queue = nil
			if len(batch) == 0 {
				e.running = false
				e.mu.Unlock()
				return
			}
			e.mu.Unlock()
			for _, o := range batch {
				c.report(context.Background(), o)
			}
		}
	}()
}

// events is the queue of reportLater. Close does not wait for it: an
// observer may call Close.
type events struct {
	mu      sync.Mutex
	queue   []outcome
	running bool
}

// report logs o and hands it to the observers, on the caller's goroutine.
// An internal error is logged even without a logger (to slog.Default).
func (c *Client) report(ctx context.Context, o outcome) {
	if o.op == opLost && o.lock != nil {
		c.unheld(o.lock) // the one place every end without a release passes
	}
	elapsed := c.o.clock.Now().Sub(o.begin)
	if o.lock != nil {
		o.kind = o.lock.Kind()
	} else if o.kind == "" {
		o.kind = observe.KindPlain
	}
	lg := c.o.logger
	if lg == nil && o.err != nil && errors.Is(o.err, ErrInternal) {
		lg = slog.Default()
	}
	if lg != nil {
		level, msg := o.level()
		if lg.Enabled(ctx, level) {
			attrs := []slog.Attr{
				slog.Any("keys", o.keys),
				slog.String("client", c.id),
				slog.String("owner", shortOwner(o.owner)),
				slog.Duration("elapsed", elapsed),
				slog.Int("votes", o.round.Yes),
				slog.Int("need", c.need),
				slog.Int("nodes", len(c.nodes)),
				slog.String("kind", string(o.kind)),
			}
			if o.attempts > 1 {
				attrs = append(attrs, slog.Int("attempts", o.attempts))
			}
			if o.passed {
				attrs = append(attrs, slog.Bool("passed", true))
			}

			if o.lock != nil && o.lock.token != 0 {
				attrs = append(attrs, slog.Int64("token", o.lock.token))
			}
			if o.err != nil {
				attrs = append(attrs, slog.String("error", o.err.Error()))
			}
			lg.LogAttrs(ctx, level, msg, attrs...)
		}
	}
	if len(c.o.observers) == 0 || o.logOnly {
		return
	}
	e := observe.Event{Context: ctx, Op: o.op.pub(), Keys: o.keys, Err: o.err, Attempts: o.attempts, Elapsed: elapsed, Remaining: o.left,
		Passed: o.passed, Kind: o.kind}
	if o.lock != nil {
		e.Lock = o.lock // a nil *Lock would make a non-nil observe.Lock
	}
	if qe, ok := o.err.(*QuorumError); ok {
		e.Nodes = qe.Nodes
	} else if o.round.Votes != nil {
		e.Nodes = c.results(o.round)
	}
	for _, fn := range c.o.observers {
		fn(e)
	}
}

// level returns the level and message of o's log line: a failure the
// operator may have to act on at Warn (lost, not obtained for want of
// answering nodes, a failed release or extension), a bug at Error, and
// the normal outcomes below: a key held by someone else (Debug for one
// attempt, Info for a Lock that waited until its ctx or attempt cap ended
// it) and every success at Debug.
func (o outcome) level() (slog.Level, string) {
	switch {
	case o.err != nil && errors.Is(o.err, ErrInternal):
		return slog.LevelError, "redlock: internal error"
	case o.op == opLost:
		return slog.LevelWarn, "redlock: lock lost"
	case o.err != nil && o.op == opAcquire && heldElsewhere(o.err):
		if o.attempts > 1 {
			return slog.LevelInfo, "redlock: not obtained: held elsewhere" // a Lock that waited its ctx out
		}
		return slog.LevelDebug, "redlock: not obtained: held elsewhere" // a TryLock's normal no
	case o.err != nil && o.op == opAcquire:
		return slog.LevelWarn, "redlock: not obtained"
	case o.err != nil && o.op == opRenew && isMaxHold(o.err):
		return slog.LevelWarn, "redlock: max hold reached, renewal stopped"
	case o.err != nil:
		return slog.LevelWarn, "redlock: " + o.op.String() + " failed"
	case o.op == opAcquire:
		return slog.LevelDebug, "redlock: acquired"
	case o.op == opRelease:
		return slog.LevelDebug, "redlock: released"
	case o.op == opRenew:
		return slog.LevelDebug, "redlock: renewed"
	}
	return slog.LevelDebug, "redlock: extended"
}

// observeNode reports one node call to the node observers; calls that sent
// nothing to the node are not reported.
func (c *Client) observeNode(ctx context.Context, o op, i int, v quorum.Vote) {
	if untouched(v.Err) {
		return
	}
	e := observe.NodeEvent{Context: ctx, Op: o.pub(), NodeResult: observe.NodeResult{Addr: c.nodes[i].Addr(), Vote: v.OK, Err: v.Err, Latency: v.Latency},
		Late: !v.Done}
	for _, fn := range c.o.nodeObs {
		fn(e)
	}
}

// shortOwner is the first 8 characters of an owner value's random part,
// enough to tell attempts apart in logs ("" before any attempt).
func shortOwner(v string) string {
	_, a := splitOwner(v)
	if len(a) > 8 {
		a = a[:8]
	}
	return a
}

// heldElsewhere reports whether err is an acquisition refused because the
// key is held: its last round's plain no votes alone leave the yes votes
// short of the quorum, and nothing else (a type clash, refusing nodes,
// Close) ended it but the call's own ctx.
func heldElsewhere(err error) bool {
	qe, ok := err.(*QuorumError)
	if !ok || qe.Cause != nil && !errors.Is(qe.Cause, context.Canceled) && !errors.Is(qe.Cause, context.DeadlineExceeded) {
		return false
	}
	no := 0
	for _, n := range qe.Nodes {
		if n.Err == nil && !n.Vote {
			no++
		}
	}
	return no > 0 && no > len(qe.Nodes)-qe.Need
}
