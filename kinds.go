package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/redlock-go/redlock/internal/handoff"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/observe"
)

// WithLock returns a copy of ctx carrying l, as Run's ctx carries its
// Lock: LockFrom returns it, and a Reentrant call with that ctx enters l's
// hold.
func WithLock(ctx context.Context, l *Lock) context.Context {
	return context.WithValue(ctx, lockKey{}, l)
}

// lockType is what one lock type adds to the core; one file per type
// (kind_*.go, and fencing.go for a plain lock with fencing tokens). A
// call's type comes with its option (kindOption) and is checked once,
// when the options are read (pickType); the core asks it, never which
// type it is. Types embed plain and override what differs.
type lockType interface {
	// is says what the type is, as data.
	is() traits
	// check refuses a call the type cannot serve, before any traffic,
	// and may bound the call's options (a fair waiter's backoff).
	check(c *Client, r *request) error
	// enter decides a call whose ctx carries parent, this Client's Lock
	// of the same lock: enter its hold, take another share, or refuse a
	// call that could only wait for the caller itself.
	enter(r *request, parent *Lock) error
	// attempt makes attempt n of r: one round per key set it tries.
	attempt(ctx context.Context, c *Client, r *request, n int) (result, error)
	// command is the acquisition of keys by owner on a node, and the one
	// for nodes whose client may send it twice (it must say yes where our
	// value already is).
	command(c *Client, r *request, keys []string, owner string) (cmd, again *node.Cmd)
	// won turns a round that reached its quorum into the lock's fencing
	// token (0 without), or into the outcome of a failure.
	won(ctx context.Context, c *Client, r *request, keys []string, owner string, out quorum.Outcome) (int64, quorum.Outcome)
	// refused returns why a round that did not win must not be retried
	// (a key of another type), or nil: the lock was held, or nodes failed.
	refused(out quorum.Outcome) error
	// queue puts a waiting call in this Client's local queue of its lock:
	// the Turn it waits on and what to call when it leaves (with the Lock
	// it got, or nil), after the Turn.
	queue(ctx context.Context, w *wait) (*handoff.Turn, func(*Lock), error)
	// waitKey is the local queue and release channel of the lock asked
	// for key.
	waitKey(key string) string
	// release deletes l's hold on a node, announcing it or not.
	release(l *Lock, announce bool) *node.Cmd
	// leftover undoes, on a node that refused l's attempt, what the
	// refusal wrote there (a writer's intent), once l is released; nil
	// if a refusal writes nothing.
	leftover(l *Lock) *node.Cmd
}

// traits is what a lock type is, as data: the core reads it instead of
// asking which type a lock is.
type traits struct {
	kind observe.Kind // names the type (Lock.Kind, observe.Event.Kind, logs)
	// tryFirst: a call with no local waiter ahead makes one attempt before
	// it queues.
	tryFirst bool
	// runs: holds pass between this Client's waiters in runs
	// (WithLocalHandoff), and waiters give way to other processes' (the
	// giveWay pacer, rivals.go).
	runs bool
	// shared: others may hold beside a holder: a waiter that got in lets
	// the next local waiter try at once, or, for waiters queued as shared
	// (reader.queue), all those at the front.
	shared bool
	// foreign: the key may be held by an owner value this library did not
	// write, whose release is not announced: a waiter polls it (the
	// pollForeign pacer, foreign.go).
	foreign bool
}

// kindChoice is what a call's type options said (callOptions); pickType
// checks it against the call.
type kindChoice struct {
	typ lockType // nil for plain
	n   int      // how many type options the call gave (one at most)
}

// kindOption is the option of lock type t: the type comes with it, so
// that nothing else names the types.
func kindOption(t lockType) LockOption {
	return callOption(func(o *callOptions) { o.kind = kindChoice{typ: t, n: o.kind.n + 1} })
}

// pickType chooses the type of a call on keys with options o, whose
// Client has WithFencing set or not; a Client's WithFencing applies to its
// plain locks. It refuses, before any traffic, type options that cannot
// work together.
func pickType(o *callOptions, keys []string, clientFencing bool) (lockType, error) {
	k := o.kind
	switch {
	case k.n > 1:
		return nil, invalid("one lock type per call (%d given)", k.n)
	case k.typ == nil && o.fencing:
		return fenced{}, nil
	case k.typ == nil:
		return plain{}, nil
	case len(keys) != 1:
		return nil, invalid("a %s lock takes one key (%d given)", k.typ.is().kind, len(keys))
	case o.fencing && !clientFencing:
		return nil, invalid("fencing tokens are for plain locks, not %s locks", k.typ.is().kind)
	}
	o.fencing = false
	return k.typ, nil
}

// enterParent decides a call r whose ctx carries parent, a Lock of this
// Client: a Lock of another key, or one already released, is no concern;
// otherwise the call's type decides (lockType.enter).
func (r *request) enterParent(parent *Lock) error {
	if parent.waitKey() != r.queue() && !slices.Contains(parent.keys, r.keys[0]) {
		return nil
	}
	if errors.Is(parent.Err(), ErrReleased) {
		return nil // over: the call takes a hold of its own
	}
	return r.typ.enter(r, parent)
}

// queue is the key of the request's local queue and of the release
// notifications that wake it.
func (r *request) queue() string { return r.typ.waitKey(r.keys[0]) }

// heldByCaller is the error of a call that could only wait for parent,
// which its own ctx carries.
func heldByCaller(r *request, parent *Lock) error {
	return fmt.Errorf("%w: %s lock of %s asked while holding its %s lock", ErrHeldByCaller, r.typ.is().kind, shortKey(r.keys[0]), parent.Kind())
}

// Kind returns the lock's type: observe.KindPlain unless the call asked for
// another (see LockOption).
func (l *Lock) Kind() observe.Kind {
	if l == nil {
		return ""
	}
	return l.typ.is().kind
}

// waitKey is the key of the local queue the Lock is handed on in and of its
// release notifications (see request.queue).
func (l *Lock) waitKey() string { return l.typ.waitKey(l.name) }
