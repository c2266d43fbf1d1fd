package redlock

import (
	"log/slog"
	"math"
	"time"

	"github.com/redlock-go/redlock/clock"
	"github.com/redlock-go/redlock/internal/lockstate"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/internal/spec"
	"github.com/redlock-go/redlock/observe"
)

// Defaults of the Client options, all in one place (each option's doc
// says its default). A zero value given to an option keeps its default.
const (
	defaultNodeTimeout = spec.DefaultNodeTimeout // WithNodeTimeout
	defaultDriftFactor = spec.DefaultDriftFactor // WithDrift
	defaultRetryMin    = 2 * time.Millisecond    // WithRetryBackoff
	defaultRetryMax    = 100 * time.Millisecond
	defaultLease       = 30 * time.Second // WithWatchdog; renewed every lease/3
	// defaultLocalHandoff is how many times in a row a lock may pass
	// between waiters of one Client before it is released on the nodes
	// (WithLocalHandoff).
	defaultLocalHandoff = 256
	// defaultLocalHandoffRun is how long a run of passes may last while
	// another process waits for the key (WithLocalHandoff's run).
	defaultLocalHandoffRun = 5 * time.Millisecond
	// defaultQuarantineWindow is the restart quarantine's deployment
	// setting (WithRestartQuarantine): the default lease and half of it
	// again as margin.
	defaultQuarantineWindow = defaultLease + defaultLease/2
)

// quorumSize is WithQuorum's k: 0 a majority, AllNodes every node, else
// at least k.
type quorumSize int

func (q quorumSize) need(n int) int {
	switch {
	case q == 0:
		return n/2 + 1
	case q == AllNodes:
		return n
	}
	return int(q)
}

// MaxTTL is the longest TTL (and watchdog lease) a Client accepts; longer
// ones are refused with ErrInvalidArgument before any traffic, as are keys
// longer than 1024 bytes. A node that restarts empty is kept out of
// quorums for as long as a lock it held may still be alive, so one lock of
// a year would cost every restart a year; work of unknown length holds its
// lock with Watchdog instead.
const MaxTTL = 24 * time.Hour

// maxKeyLen is the longest key, in bytes, a lock call accepts; longer ones
// are refused with ErrInvalidArgument before any traffic. Error messages
// and logs show at most the first 64 bytes of a key.
const maxKeyLen = 1024

// Limits of what a Client keeps, shown to operators by package admin.
const (
	fairWaiterTimeout = spec.FairWaiterTimeout // admin.FairWaiterTimeout
	fenceMargin       = spec.FenceMargin       // admin.FenceMargin
)

// Special values of a TTL and of options, where a negative number
// means something other than invalid input.
const (
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
	Watchdog time.Duration = -1
	// QuarantineOff as WithRestartQuarantine's window turns quarantine off.
	QuarantineOff time.Duration = -1
	// LocalHandoffOff, passed to WithLocalHandoff, turns local hand-off off:
	// every Release deletes the lock on the nodes.
	LocalHandoffOff = -1
	// AllNodes, passed to WithQuorum, requires every node (MultiLock
	// semantics): any node down makes the lock unavailable.
	AllNodes = -1
)

type options struct {
	callOptions  // what a call may set over the Client's
	quorum       quorumSize
	nodeTimeout  time.Duration
	driftFactor  float64
	minValidity  time.Duration
	lease        time.Duration
	localHandoff int
	localRun     time.Duration // WithLocalHandoff's run
	renewEvery   time.Duration
	name         string
	logger       *slog.Logger
	clock        clock.Clock
	observers    []func(observe.Event)
	nodeObs      []func(observe.NodeEvent)
	qWindow      time.Duration // WithRestartQuarantine: the deployment's longest lock; 0 off
	qFresh       bool
	qFloor       bool          // WithRestartQuarantine(..., QuarantineSettingFloor)
	driftEvery   time.Duration // WithDrift: Drift.Monitor
	driftOn      bool
	driftExclude bool
	coalesce     bool // WithoutCoalescing
	durable      bool // WithDurableVotes
	// phaseTable, if set (by tests only), stands for lockstate.Next for
	// every Lock, under its mutex: tests wrap it to watch transitions or
	// to break a row.
	phaseTable func(lockstate.Phase, lockstate.Event) (lockstate.Phase, bool)
}

func defaults() options {
	return options{
		callOptions:  callOptions{retryMin: defaultRetryMin, retryMax: defaultRetryMax},
		nodeTimeout:  defaultNodeTimeout,
		driftFactor:  defaultDriftFactor,
		lease:        defaultLease,
		qWindow:      defaultQuarantineWindow,
		localHandoff: defaultLocalHandoff,
		localRun:     defaultLocalHandoffRun,
		renewEvery:   defaultLease / 3,
		clock:        clock.Real(),
		coalesce:     true,
	}
}

// Option configures a Client (New, NewFromURLs). Every option follows one
// rule: a zero value means the default; a negative value is refused by New,
// except the named constants (QuarantineOff, LocalHandoffOff, AllNodes,
// Watchdog as a TTL).
type Option interface{ apply(*options) }

// LockOption is an Option that may also be given to one call (Lock,
// TryLock, LockKeys, TryLockKeys, Run): it then holds for that call and the
// Lock it returns, over the Client's setting, so that key families with
// different needs share one Client (its connections, pub/sub and
// renewals). WithFencing, WithRetryBackoff, WithMaxAttempts and WithMaxHold
// are LockOptions, and so are the lock types: Reentrant, ReadLock,
// WriteLock, Permits, Fair (without one a lock is plain; Lock.Kind says
// which). Every type runs on the plain lock's quorum, validity with drift,
// clean-up of failed attempts, Extend, watchdog renewals, lost signal,
// Release and waiting for a release notification.
type LockOption interface {
	Option
	applyCall(*callOptions)
}

// clientOption is an Option for the Client only.
type clientOption func(*options)

func (f clientOption) apply(o *options) { f(o) }

// callOption is a LockOption.
type callOption func(*callOptions)

func (f callOption) apply(o *options)         { f(&o.callOptions) }
func (f callOption) applyCall(o *callOptions) { f(o) }

// callOptions are the options a call may set (LockOption).
type callOptions struct {
	fencing     bool
	retryMin    time.Duration
	retryMax    time.Duration
	maxAttempts int
	maxHold     time.Duration
	kind        kindChoice // the lock type's options (kinds.go); per call only
}

// validate checks what a call may set; New and every call with
// LockOptions run it.
func (o *callOptions) validate() error {
	switch {
	case o.retryMin < 0 || o.retryMax < o.retryMin:
		return invalid("retry backoff [%v, %v] must be positive with min <= max", o.retryMin, o.retryMax)
	case o.maxHold < 0:
		return invalid("max hold %v must not be negative", o.maxHold)
	case o.maxAttempts < 0:
		return invalid("max attempts %d must not be negative", o.maxAttempts)
	}
	return nil
}

// WithQuorum sets how many of the N nodes must agree: k of them, or every
// one with AllNodes. The default, 0, is the Redlock quorum: a majority,
// N/2+1. New refuses k <= N/2 (two holders could coexist), k > N, and a
// negative k other than AllNodes.
func WithQuorum(k int) Option { return clientOption(func(o *options) { o.quorum = quorumSize(k) }) }

// WithNodeTimeout bounds every call to one node (default 50ms). It is the
// longest a dead or frozen node can delay a round that needs it; keep it
// small next to the TTL. Each call is further capped at a tenth of the TTL.
func WithNodeTimeout(d time.Duration) Option {
	return clientOption(func(o *options) { set(&o.nodeTimeout, d) })
}

// set sets *p to v unless v is zero (the default stays).
func set[T comparable](p *T, v T) {
	var zero T
	if v != zero {
		*p = v
	}
}

// WithMinValidity refuses to return a lock with less validity left than d
// (default 0: any positive validity). Such an attempt counts as failed.
func WithMinValidity(d time.Duration) Option {
	return clientOption(func(o *options) { set(&o.minValidity, d) })
}

// WithRetryBackoff sets the wait between attempts of Lock: exponential from
// min, doubling up to max, each wait drawn at random from [d/2, d]
// (defaults 2ms and 100ms; a zero keeps its default). A plain Lock whose
// key is held by an owner value this library did not write (go-redsync's:
// its release publishes nothing) waits at most 25-50 ms between attempts
// instead.
func WithRetryBackoff(min, max time.Duration) LockOption {
	return callOption(func(o *callOptions) { set(&o.retryMin, min); set(&o.retryMax, max) })
}

// WithMaxAttempts caps the attempts of one Lock call (default 0: retry until
// ctx is done).
func WithMaxAttempts(n int) LockOption {
	return callOption(func(o *callOptions) { set(&o.maxAttempts, n) })
}

// WithMaxHold caps how long one lock may be kept by extensions and
// watchdog renewals, counted from its acquisition (default 0: no cap). An
// Extend that would carry the lock past it fails with ErrMaxHold (which
// matches ErrNotExtended); a watchdog stops renewing, and the lock ends at
// its deadline. A stuck holder then loses the lock within the cap instead
// of keeping it forever.
func WithMaxHold(d time.Duration) LockOption {
	return callOption(func(o *callOptions) { set(&o.maxHold, d) })
}

// WithWatchdog sets the lease of locks taken in watchdog mode (see
// Watchdog; default 30 s) and how often they are renewed (default
// lease/3; a zero keeps its default). every must be shorter than the
// lease's validity.
func WithWatchdog(lease, every time.Duration) Option {
	return clientOption(func(o *options) {
		set(&o.lease, lease)
		o.renewEvery = o.lease / 3
		set(&o.renewEvery, every)
	})
}

// WithLocalHandoff sets the local hand-off: how many times in a row (n,
// default 256) and for how long (run, default 5 ms) a lock may pass
// directly from a Release to the next waiting Lock call of this Client for
// the same key, with no round trip to the nodes. A zero keeps a default;
// LocalHandoffOff as n turns passing off.
//
// The lock stays held on the quorum under the same owner value and
// deadline; only the holder inside this process changes, in the order the
// Lock calls queued. After n passes it is released on the nodes, and this
// Client's waiters wait for the nodes' release notification like other
// processes' waiters, so that they get their turn. Only single-key locks
// taken with Lock are passed, and a fixed-TTL lock only with at least
// half the waiter's TTL left.
//
// run bounds a run of passes in time, from the lock's acquisition on the
// nodes to the Release that would pass it on. While another process is
// seen waiting for the key since this Client took it (its head lost a
// race for it after a release, or a node counts another subscriber to the
// key's release channel), the run ends after run, so that processes take
// turns; while none is seen, it may go on for 40 times run (200 ms by
// default), and from run on this Client asks a node, at most once every
// run and in the background, whether another process waits (PUBSUB
// NUMSUB; an error, e.g. a user without that command, counts as a yes);
// so does a LockKeys call of this Client waiting for the key. Waiters that
// cannot subscribe (cluster nodes, a user without the channel permission)
// are not seen: they poll, and a poll finds the key free only between two
// runs.
func WithLocalHandoff(n int, run time.Duration) Option {
	return clientOption(func(o *options) {
		set(&o.localHandoff, n)
		set(&o.localRun, run)
	})
}

// WithName sets a name for this Client (default none), for example the
// host or pod, that begins its instance id (Client.ID) and so every owner
// value it stores: redlock inspect and the logs then show which process
// holds a lock. At most 64 printable bytes, no spaces or colons.
func WithName(name string) Option { return clientOption(func(o *options) { o.name = name }) }

// WithLogger sends the Client's log lines to l: every success at Debug,
// a key held by someone else at Debug (one attempt) or Info (a Lock whose
// ctx or attempt cap ended it), failures the operator may have to act on
// at Warn, a bug of this package at Error. Without it nothing is logged
// but four warnings and internal errors, which go to slog.Default: a Lock
// still waiting after a second in which too few nodes answered, a foreign
// owner value found, a node whose identity or TTL register cannot be read
// or written, and ErrInternal.
func WithLogger(l *slog.Logger) Option { return clientOption(func(o *options) { o.logger = l }) }

// WithClock sets the time source for validity and backoff (default
// clock.Real, monotonic). Tests use clock.Fake; chaos tests clock.Scaled.
func WithClock(c clock.Clock) Option { return clientOption(func(o *options) { o.clock = c }) }

// WithObserver calls fn after every Lock, TryLock, LockKeys, TryLockKeys,
// Extend and Release that got past input validation, on the caller's
// goroutine, once the call has let go of every lock of the Lock and the
// Client; and after every watchdog renewal and every loss it found, in
// order, on a goroutine of the Client's (a loss found by the deadline
// timer or by Err is reported on that goroutine). fn may call anything on
// the Lock or the Client (Release on a "lost" event, Close); it must be
// safe for concurrent use, and a slow fn delays later events but no
// renewal. It is the hook for metrics (see the redlockotel module). Each
// WithObserver adds one observer; they run in the order given.
func WithObserver(fn func(observe.Event)) Option {
	return clientOption(func(o *options) { o.observers = append(o.observers, fn) })
}

// WithNodeObserver calls fn after every call to a node, also those that
// finish after their round was decided (a call returns at quorum and does
// not wait for slow nodes), on the goroutine that made the node call; fn
// must be fast and safe for concurrent use. It shows per-node latency,
// errors and timeouts, which observe.Event.Nodes cannot (there a slow node is only
// observe.ErrPending). Each WithNodeObserver adds one observer.
func WithNodeObserver(fn func(observe.NodeEvent)) Option {
	return clientOption(func(o *options) { o.nodeObs = append(o.nodeObs, fn) })
}

func (o *options) validate(n int) error {
	if err := o.callOptions.validate(); err != nil {
		return err
	}
	if o.kind.n > 0 {
		return invalid("a lock type (%s) is an option of a call, not of the Client", o.kind.typ.is().kind)
	}
	switch {
	case o.nodeTimeout < 0:
		return invalid("node timeout %v must not be negative", o.nodeTimeout)
	case o.driftFactor < 0 || o.driftFactor >= 1 || math.IsNaN(o.driftFactor):
		return invalid("drift factor %v must be in [0, 1)", o.driftFactor)
	case o.minValidity < 0:
		return invalid("min validity %v must not be negative", o.minValidity)
	case o.localHandoff < LocalHandoffOff:
		return invalid("local handoff %d must not be negative (LocalHandoffOff turns it off)", o.localHandoff)
	case o.localRun < 0:
		return invalid("local handoff run %v must not be negative", o.localRun)
	case o.qWindow < 0 && o.qWindow != QuarantineOff:
		return invalid("restart quarantine window %v must not be negative (QuarantineOff turns it off)", o.qWindow)
	case o.driftOn && o.driftEvery < 0:
		return invalid("drift monitor interval %v must not be negative", o.driftEvery)
	case o.driftExclude && !o.driftOn:
		return invalid("drift Exclude needs a Monitor interval")
	case o.clock == nil:
		return invalid("nil clock")
	case o.lease > MaxTTL:
		return invalid("watchdog lease %v is longer than MaxTTL (%v)", o.lease, MaxTTL)
	case o.lease < time.Millisecond || o.renewEvery <= 0 || o.renewEvery >= o.lease-driftBudget(o.lease, o.driftFactor):
		return invalid("watchdog lease %v renewed every %v: need a lease of at least 1ms and 0 < interval < its validity", o.lease, o.renewEvery)
	}
	if err := checkName(o.name); err != nil {
		return err
	}
	for _, fn := range o.observers {
		if fn == nil {
			return invalid("nil observer")
		}
	}
	for _, fn := range o.nodeObs {
		if fn == nil {
			return invalid("nil node observer")
		}
	}
	if o.quorum < AllNodes {
		return invalid("quorum %d: k must be at least 1, 0 (a majority) or AllNodes", o.quorum)
	}
	if err := quorum.Check(n, o.quorum.need(n)); err != nil {
		return invalid("%v", err)
	}
	return nil
}

// WithDurableVotes makes every vote durable (default: off). Each command
// that may grant or lengthen a lock on a node (acquisitions, Extend,
// watchdog renewals, fencing raises) is followed on that node, in the same
// pipeline, by WAITAOF 1 0 t, t being the time left of the node's
// deadline less a fifth of it (at least 5ms), left for the node's answer;
// the node's yes counts only if it confirms that the write is fsynced to
// its append-only file in time. A yes it does not confirm (an
// fsync slower than the node timeout, appendonly off, a server without
// WAITAOF: Redis before 7.2, Valkey before 8.0) does not count: the node's
// error in the QuorumError matches observe.ErrNotDurable and says why, and what
// the command wrote there is undone like any vote of unknown outcome.
// Nothing falls back silently to votes that are not durable. Every node
// must be a standalone or Sentinel-failover *redis.Client: New refuses a
// cluster or ring client (ErrInvalidArgument), which would send the
// keyless WAITAOF to some shard, not behind the command it confirms.
//
// Durable votes survive a node's crash and restart. The restart
// quarantine (WithRestartQuarantine) then exempts a restarted node that
// loaded its previous process's append-only file, as long as the TTL
// registers show no live lock granted without durable votes: locks are
// granted again as soon as the node is back, even when a majority of the
// nodes restarted together. SAFETY.md states the rule and what it assumes
// (fsync is honest; the AOF file survives the restart; every Client of
// the nodes uses durable votes, which the registers check). The cost is
// one fsync per pipeline per node: run the nodes with appendonly yes and
// appendfsync everysec (always works too, at the cost of every write).
// redlock doctor reports whether each node can give durable votes.
func WithDurableVotes() Option { return clientOption(func(o *options) { o.durable = true }) }

// WithoutCoalescing turns per-node command coalescing off (it is on by default).
// While a call to a node is in flight, the calls of other goroutines to
// that node queue up and then go out together as one pipeline on one
// connection: one write and one read for all of them instead of a round
// trip each, which is what limits many goroutines locking independent
// keys. A call that finds nothing in flight is sent at once, so a lone
// caller waits no longer than without it, and a node has at most one call
// or pipeline in flight: a frozen node is never flooded. Each call keeps
// its own node deadline: an acquisition or extension still queued at its
// deadline is never sent (its node counts as not holding the lock,
// nothing to undo there); one already sent counts as a timeout (it may
// have run, and is undone). A release still queued when its caller leaves
// is sent late rather than dropped, so that its key does not stay until
// the TTL (it deletes only its own owner value, so it cannot touch a later
// holder's key). Only nodes given as *redis.Client coalesce; cluster
// clients, rings and other clients send one command per call. Pipelined
// commands run under a context of their own (the latest deadline of the
// batch), so go-redis hooks see ProcessPipeline rather than Process for
// them and not the caller's context values. Off, every call takes a
// pooled connection of its own.
func WithoutCoalescing() Option { return clientOption(func(o *options) { o.coalesce = false }) }
