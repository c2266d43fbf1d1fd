package redlock

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strconv"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
)

// Kind is a lock's type: what holding it keeps out. A call picks one with
// a LockOption (Reentrant, ReadLock, WriteLock, Permits); without one a
// lock is KindPlain. Every type runs on the plain lock's quorum, validity
// with drift, clean-up of failed attempts, Extend, watchdog renewals, lost
// signal, Release and waiting for a release notification.
type Kind string

const (
	// KindPlain: one holder at a time (a string key per node).
	KindPlain Kind = "plain"
	// KindReentrant: one holder at a time, who may enter again (see
	// Reentrant).
	KindReentrant Kind = "reentrant"
	// KindRead: many readers at a time, no writer (see ReadLock).
	KindRead Kind = "read"
	// KindWrite: one writer, no reader (see WriteLock).
	KindWrite Kind = "write"
	// KindSemaphore: at most n holders at a time (see Permits).
	KindSemaphore Kind = "semaphore"
)

var (
	// ErrWrongType: a typed Lock call met a key that a node holds as
	// another type of lock, or as data that is not a lock. Nothing was
	// written; the call is not retried.
	ErrWrongType = errors.New("redlock: key holds another type of lock")
	// ErrHeldByCaller: the call's ctx carries a Lock of this Client on
	// the same key (WithLock, Run) and waiting would deadlock on it: a
	// second Lock without Reentrant on both, or a write lock asked by a
	// reader (upgrade). Refused before any traffic.
	ErrHeldByCaller = errors.New("redlock: key is held by the caller")
)

// Reentrant makes the call a reentrant lock: when the call's ctx carries a
// reentrant Lock of this Client on the same key (Run's ctx, or WithLock),
// the call enters that hold instead of waiting for it. Each entry is a Lock
// of its own, with its own lease, Extend, watchdog and Release, in any
// order; the key stays while any entry is held and is deleted with the
// last. An entry is one attempt with no wait, and it never re-creates the
// key: once the hold is lost, entering it fails (ErrNotObtained, with the
// loss as cause). Without such a ctx, the call takes a new hold, waiting
// for any other holder like a plain lock. On each node the key is a hash
// of the entries' owner values and expiries (Redis 7.0 and later; no
// HEXPIRE needed). One key per call.
func Reentrant() LockOption { return kindOption(KindReentrant, 0) }

// ReadLock makes the call a reader of a read-write lock: readers hold the
// key together, each with its own lease (a dead reader's share expires on
// its own), and no writer holds it meanwhile. Writers are not starved: a
// refused writer keeps new readers out for 4 times its maximum retry
// backoff (WithRetryBackoff: 400ms by default), renewed by each of its
// attempts, so the readers inside drain and the writer gets in. One key
// per call.
func ReadLock() LockOption { return kindOption(KindRead, 0) }

// WriteLock makes the call the writer of a read-write lock: it holds the
// key alone, with no reader or other writer (see ReadLock). A reader
// cannot become a writer: a WriteLock whose ctx carries this Client's
// read Lock of the key fails with ErrHeldByCaller rather than deadlock.
func WriteLock() LockOption { return kindOption(KindWrite, 0) }

// Permits makes the call take one of n permits of a semaphore named by the
// key: at most n holders at once. Permit i is a plain lock of its own on
// PermitKey(key, i), with the plain lock's guarantee; an attempt tries the
// permits one round each, starting at a random one. Lock.Key returns the
// permit's key. Every holder must use the same n: lowering n leaves the
// holders of permits at or above the new n in (at most old n until they
// release), raising it admits more at once. n must be at least 1. One key
// per call.
func Permits(n int) LockOption { return kindOption(KindSemaphore, n) }

// PermitKey returns the key of permit i of the semaphore key (see
// Permits): "{key}:permit:i", in the key's hash slot on a cluster.
func PermitKey(key string, i int) string { return "{" + key + "}:permit:" + strconv.Itoa(i) }

// permitsChannel is the key a semaphore's permits are announced under (a
// release of any permit wakes the semaphore's waiters): no lock uses it.
func permitsChannel(key string) string { return "{" + key + "}:permits" }

// WithLock returns a copy of ctx carrying l, as Run's ctx carries its
// Lock: LockFrom returns it, and a Reentrant call with that ctx enters l's
// hold.
func WithLock(ctx context.Context, l *Lock) context.Context {
	return context.WithValue(ctx, lockKey{}, l)
}

// kind is a call's lock type (callOptions). Zero: a plain lock.
type kind struct {
	k       Kind // "" for plain
	permits int  // KindSemaphore
	n       int  // how many type options the call gave (one at most)
}

func kindOption(k Kind, permits int) LockOption {
	return callOption(func(o *callOptions) { o.kind = kind{k: k, permits: permits, n: o.kind.n + 1} })
}

// of returns the Kind, KindPlain for the zero kind.
func (k kind) of() Kind {
	if k.k == "" {
		return KindPlain
	}
	return k.k
}

// shared reports a type that other holders may hold beside this one: a
// reader, a semaphore's permit.
func (k kind) shared() bool { return k.k == KindRead || k.k == KindSemaphore }

// typed reports a reentrant or read-write lock (a hash on the nodes).
func (k kind) typed() bool { return k.k == KindReentrant || k.k == KindRead || k.k == KindWrite }

// checkKind refuses a call's type options that cannot work, before any
// traffic; clientFencing is the Client's WithFencing, which typed calls
// leave out.
func (r *request) checkKind(keys []string, clientFencing bool) error {
	k := r.o.kind
	switch {
	case k.k == "":
		return nil
	case k.n > 1:
		return invalid("one lock type per call (%d given)", k.n)
	case len(keys) != 1:
		return invalid("a %s lock takes one key (%d given)", k.k, len(keys))
	case k.k == KindSemaphore && k.permits < 1:
		return invalid("permits %d must be at least 1", k.permits)
	case r.o.fencing && !clientFencing:
		return invalid("fencing tokens are for plain locks, not %s locks", k.k)
	}
	r.o.fencing = false // the Client's WithFencing applies to its plain locks
	return nil
}

// enter decides a call whose ctx carries parent, a Lock of this Client:
// a Reentrant call on the key of a reentrant parent enters its hold (one
// attempt, no wait); any other call on a key the parent holds would wait
// for the caller itself and is refused.
func (r *request) enter(parent *Lock) error {
	if parent.name != r.keys[0] && !slices.Contains(parent.keys, r.keys[0]) || parent.kind.k == KindSemaphore && r.o.kind.k == KindSemaphore {
		return nil // another key, or a second permit
	}
	err := parent.Err()
	if errors.Is(err, ErrReleased) {
		return nil // over: the call takes a hold of its own
	}
	if r.o.kind.k != KindReentrant || parent.kind.k != KindReentrant {
		return fmt.Errorf("%w: %s lock of %s asked while holding its %s lock", ErrHeldByCaller, r.o.kind.of(), shortKey(r.keys[0]), parent.kind.of())
	}
	if err != nil {
		return &QuorumError{Op: "acquire", Keys: r.keys, Need: parent.c.need, Err: ErrNotObtained, Cause: err}
	}
	r.hold, r.retry = parent.hold, false
	return nil
}

// permitFrom is where a semaphore's attempt starts among its n permits.
func (c *Client) permitFrom(n int) int { return mrand.IntN(n) }

// queue is the key of the request's local queue and of the release
// notifications that wake it.
func (r *request) queue() string { return r.o.kind.waitKey(r.keys[0]) }

// waitKey is the local queue and release channel of a lock of this type
// asked for key: a semaphore's permits all wake its waiters.
func (k kind) waitKey(key string) string {
	if k.k == KindSemaphore {
		return permitsChannel(key)
	}
	return key
}

// runs reports a type whose holds are passed between this Client's
// waiters in runs (see WithLocalHandoff): a plain lock or a semaphore's
// permit (the typed locks' entries each have their own owner value on
// the nodes; a fair lock goes to the next ticket, which may be remote).
func (k kind) runs() bool { return k.k == "" || k.k == KindSemaphore }

// typedCmd is the acquisition of a reentrant or read-write lock.
func (r *request) typedCmd(key, owner string) *node.Cmd {
	hold := r.hold
	if hold == "" {
		hold = owner // a new hold is named by its first entry
	}
	mode := node.Reentrant
	switch r.o.kind.k {
	case KindRead:
		mode = node.Read
	case KindWrite:
		mode = node.Write
	}
	return node.TypedLock(key, owner, r.ttl, mode, hold, 4*r.o.retryMax)
}

// wrongType turns a round that met a key of another type into
// ErrWrongType.
func wrongType(out quorum.Outcome) error {
	for _, v := range out.Votes {
		if node.IsWrongType(v.Err) {
			return fmt.Errorf("%w: %v", ErrWrongType, v.Err)
		}
	}
	return nil
}

// Kind returns the lock's type.
func (l *Lock) Kind() Kind {
	if l == nil {
		return ""
	}
	return l.kind.of()
}

// waitKey is the key of the local queue the Lock is handed on in and of its
// release notifications (see request.queue).
func (l *Lock) waitKey() string { return l.kind.waitKey(l.name) }

// handsOn reports whether l's type may be passed to a local waiter.
func (l *Lock) handsOn() bool { return l.kind.runs() }

// releaseCmd deletes l on a node, announcing it (for the waiters of
// package handoff) or not.
func (l *Lock) releaseCmd(announce bool) *node.Cmd {
	if announce && l.kind.k == KindSemaphore {
		return node.ReleaseAnnouncing(l.keys[0], l.owner, permitsChannel(l.name))
	}
	return node.Release(l.keys, l.owner, announce)
}
