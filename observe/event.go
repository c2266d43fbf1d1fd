package observe

import (
	"context"
	"errors"
	"time"
)

// Op names what an operation did: Event.Op, NodeEvent.Op,
// redlock.QuorumError.Op.
type Op string

// The operations.
const (
	OpAcquire Op = "acquire" // Lock, TryLock, LockKeys, TryLockKeys, Run
	OpExtend  Op = "extend"  // Extend
	OpRenew   Op = "renew"   // a watchdog renewal
	OpRelease Op = "release" // Release, and the clean-up of a failed attempt
	OpLost    Op = "lost"    // the lock ended without Release: see Lock.Done
)

// Kind is a lock's type: what holding it keeps out. A call picks one with
// a redlock.LockOption (Reentrant, ReadLock, WriteLock, Permits, Fair);
// without one a lock is KindPlain. Lock.Kind and Event.Kind report it.
type Kind string

// The lock types.
const (
	// KindPlain: one holder at a time (a string key per node).
	KindPlain Kind = "plain"
	// KindReentrant: one holder at a time, who may enter again (see
	// redlock.Reentrant).
	KindReentrant Kind = "reentrant"
	// KindRead: many readers at a time, no writer (see redlock.ReadLock).
	KindRead Kind = "read"
	// KindWrite: one writer, no reader (see redlock.WriteLock).
	KindWrite Kind = "write"
	// KindSemaphore: at most n holders at a time (see redlock.Permits).
	KindSemaphore Kind = "semaphore"
	// KindFair: one holder at a time, in request order (see redlock.Fair).
	KindFair Kind = "fair"
)

// Lock is the lock an Event is about: always a *redlock.Lock, whose
// documentation says what each method promises (this package cannot name
// that type; type-assert to pass it where a *redlock.Lock is wanted).
// Interface values of the same Lock compare equal.
type Lock interface {
	Key() string
	Keys() []string
	Kind() Kind
	Owner() string
	Token() int64
	TTL() time.Duration
	Deadline() time.Time
	Remaining() time.Duration
	Votes() []NodeResult
	Done() <-chan struct{}
	Context() context.Context
	Err() error
	Extend(ctx context.Context, ttl time.Duration) error
	Release(ctx context.Context) error
}

// NodeResult is what one node answered in a round.
type NodeResult struct {
	Addr    string        // the node's address
	Vote    bool          // it said yes (granted, extended, released)
	Err     error         // the call failed, timed out (Timeout), was still pending (redlock.ErrPending), or was not sent (redlock.ErrNodeSkipped)
	Latency time.Duration // from the start of the round to the answer
	// Discounted, if set, says why the node's yes did not count toward the
	// quorum (redlock.ErrNodeQuarantined, ErrSameServer, ErrClockDrift):
	// the node received the command, but its vote could not be trusted.
	// With Err redlock.ErrPending (the round did not wait for the node),
	// it says why its yes would not have counted either.
	Discounted error
}

// Timeout reports whether the call hit its deadline: Err is
// context.DeadlineExceeded or an error whose Timeout method says so.
func (r NodeResult) Timeout() bool {
	if errors.Is(r.Err, context.DeadlineExceeded) {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(r.Err, &t) && t.Timeout()
}

// NodeEvent is the answer of one node call (redlock.WithNodeObserver).
type NodeEvent struct {
	Op Op // OpAcquire, OpExtend, OpRenew or OpRelease (also the clean-up of a failed attempt)
	NodeResult
	// Late: the answer came after the round was decided; the caller did
	// not wait for it. (A call is not cut short when the caller's ctx
	// ends: it runs to its answer or its own deadline, so its error is
	// always the node's.)
	Late bool
	// Context is the ctx of the call the node call belongs to (without
	// its cancellation), so its trace span parents the node call; a
	// background ctx for renewals and late clean-ups.
	Context context.Context
}

// Event describes one finished operation, for metrics and tracing
// (redlock.WithObserver).
type Event struct {
	// Op is OpAcquire, OpExtend, OpRelease, OpRenew (a watchdog renewal;
	// Err matches redlock.ErrMaxHold when renewal stopped at the max hold)
	// or OpLost (the lock ended without Release; Err is the cause,
	// matching redlock.ErrLockLost).
	Op       Op
	Keys     []string      // the lock's keys (do not modify)
	Err      error         // nil on success
	Attempts int           // rounds made (0: refused before any round, or a "lost" event)
	Elapsed  time.Duration // time of the whole call, on the Client's clock
	Nodes    []NodeResult  // the last round, nil if there was none (do not modify)

	// Lock is the *redlock.Lock the operation acted on; nil when an
	// acquisition failed.
	Lock Lock

	// Kind is the lock's type (KindPlain unless the call asked for
	// another).
	Kind Kind

	// Passed: the lock went from the releasing waiter to the acquiring
	// one inside this Client, with no round trip to the nodes (see
	// redlock.WithLocalHandoff); Nodes then are the answers of the
	// acquisition that took it on the nodes.
	Passed bool

	// Remaining is the validity left: after an acquisition or extension,
	// when the call returned (0 if it failed); for a release, when Release
	// was called (0 means the lock's validity had already run out: the
	// holder kept it past its deadline).
	Remaining time.Duration

	// Context is the ctx of the call (Lock, Extend, Release...), so that
	// its trace span parents the event; a background ctx for renewals and
	// for losses found in the background.
	Context context.Context
}
