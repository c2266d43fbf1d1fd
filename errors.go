package redlock

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/observe"
)

// Sentinel errors. Every error the package returns matches one of them with
// errors.Is; most also carry per-node detail in a *QuorumError.
var (
	// ErrNotObtained: the lock was not acquired (held by someone else,
	// too few nodes answered, or the validity ran out during the attempt).
	ErrNotObtained = errors.New("redlock: lock not obtained")
	// ErrLockLost: the lock is no longer held: its validity ran out, or a
	// quorum of nodes no longer holds our owner value.
	ErrLockLost = errors.New("redlock: lock lost")
	// ErrNotExtended: an extension did not reach a quorum because nodes
	// failed or timed out; the lock stays valid until its deadline.
	ErrNotExtended = errors.New("redlock: lock not extended")
	// ErrNotHeld: Release could not confirm on a quorum that it deleted
	// our lock (it expired or was taken over, nodes failed, or it was
	// released before).
	ErrNotHeld = errors.New("redlock: lock not held")
	// ErrInvalidArgument: bad input, refused before any network traffic.
	ErrInvalidArgument = errors.New("redlock: invalid argument")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("redlock: client closed")
	// ErrWrongType: a typed Lock call met a key that a node holds as
	// another type of lock, or as data that is not a lock. Nothing was
	// written; the call is not retried. A plain call never returns it: to
	// a plain lock any existing key is held.
	ErrWrongType = errors.New("redlock: key holds another type of lock")
	// ErrHeldByCaller: the call's ctx carries a Lock of this Client on
	// the same key (WithLock, Run) and waiting would deadlock on it: a
	// second Lock without Reentrant on both, a write lock asked by a
	// reader (upgrade), or a permit of a semaphore of one. Refused before
	// any traffic.
	ErrHeldByCaller = errors.New("redlock: key is held by the caller")
	// ErrMaxHold: an extension or renewal would keep the lock past
	// WithMaxHold. It matches ErrNotExtended; the cause of a watchdog lock
	// that ran out there matches it too.
	ErrMaxHold error = &maxHoldError{}
	// ErrReleased is the cause of a Lock's end (context.Cause of its
	// Context) after Release.
	ErrReleased = errors.New("redlock: lock released")
	// ErrInternal: this package caught a bug of its own. The Lock it hit
	// ended as lost (the error also matches ErrLockLost) and the error
	// was logged; the process and the Client's other locks go on. See
	// *PhaseError.
	ErrInternal = errors.New("redlock: internal error")
)

// Per-node reasons: the Err or Discounted of an observe.NodeResult in a
// QuorumError (Lock.Votes, observe.Event.Nodes, observe.NodeEvent.Err) says
// why one node's vote did not count. They never come alone from a call: the
// call's error is a QuorumError matching ErrNotObtained, ErrNotExtended,
// ErrLockLost or ErrNotHeld.
var (
	// ErrPending: the node had not answered when the round was decided
	// (its call goes on in the background).
	ErrPending = quorum.ErrPending
	// ErrNodeSkipped: an acquisition or extension did not send to the
	// node: its last call timed out, a probe to it was in flight, and the
	// other nodes could make the quorum. Nothing needs undoing there.
	ErrNodeSkipped error = &notSentError{msg: "redlock: node skipped: its last call timed out and a probe is in flight"}
	// ErrNodeQuarantined: the node restarted (or, in strict mode, started)
	// less than the quarantine window ago and may have lost the keys it
	// held. See *QuarantineError and WithRestartQuarantine.
	ErrNodeQuarantined = errors.New("redlock: node quarantined after a restart")
	// ErrSameServer: the node is the same server (same run_id) as an
	// earlier node under another address; one server must not cast two
	// votes. See *SameServerError.
	ErrSameServer = errors.New("redlock: node is the same server as another node")
	// ErrClockDrift: the drift monitor found the node's clock outside the
	// drift budget (1 - clientRate/nodeRate beyond the drift factor), or
	// it jumped. See *DriftError and WithDriftMonitor.
	ErrClockDrift = errors.New("redlock: node clock outside the drift budget")
	// ErrNotDurable: with WithDurableVotes, the node did not confirm its
	// vote on disk; its error says why: WAITAOF refused, not answered by
	// the node's deadline, or not fsynced within its timeout.
	ErrNotDurable = node.ErrNotDurable
	// ErrFenceNotRaised: a fenced acquisition's lock had already expired
	// on the node when its fence register was to be raised to the token.
	ErrFenceNotRaised = errors.New("redlock: fence register not raised: the lock was no longer held on the node")
)

// PhaseError is the cause of a Lock ended because an event came in a
// phase of its life that the package's phase table does not pair with it
// (a bug of this package). It matches ErrInternal and ErrLockLost.
type PhaseError struct {
	Keys  []string // the Lock's keys
	Phase string   // the Lock's phase: "held", "extending", "releasing", "ended" or "passed"
	Event string   // the event: "extend", "settle", "hand-on", "release", "end" or "pass"
}

func (e *PhaseError) Error() string {
	return fmt.Sprintf("redlock: internal error: lock %s in phase %s has no transition on %s: lock lost",
		quoteKeys(e.Keys), e.Phase, e.Event)
}

// Unwrap returns ErrInternal and ErrLockLost.
func (e *PhaseError) Unwrap() []error { return []error{ErrInternal, ErrLockLost} }

type maxHoldError struct{}

func (*maxHoldError) Error() string        { return "redlock: max hold reached" }
func (*maxHoldError) Is(target error) bool { return target == ErrNotExtended }

func isMaxHold(err error) bool { return errors.Is(err, ErrMaxHold) }

// errDiscounted is a discounted vote's reason when its gate cleared
// before the error was built.
var errDiscounted = errors.New("redlock: vote not counted")

// QuorumError reports a round that did not reach its quorum, with what every
// node answered. errors.Is matches its sentinel (Err) and, when ctx ended the
// call, ctx's error.
type QuorumError struct {
	Op       observe.Op           // observe.OpAcquire, OpExtend, OpRenew or OpRelease
	Keys     []string             // the lock's keys
	Need     int                  // votes needed
	Got      int                  // counted yes votes in the last round
	Attempts int                  // rounds made
	Validity time.Duration        // validity left when the quorum was reached too late (acquire), else 0
	Nodes    []observe.NodeResult // the last round, in node order
	Err      error                // the sentinel: ErrNotObtained, ErrLockLost, ErrNotExtended or ErrNotHeld
	Cause    error                // ctx's error when ctx ended the call, else nil
}

func (e *QuorumError) Error() string {
	var b strings.Builder
	b.WriteString(e.Err.Error())
	fmt.Fprintf(&b, ": %s %s: %d yes of %d needed", e.Op, quoteKeys(e.Keys), e.Got, e.Need)
	if len(e.Nodes) > 0 {
		fmt.Fprintf(&b, ", %d nodes", len(e.Nodes))
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " after %d attempts", e.Attempts)
	}
	if e.Got >= e.Need && e.Op == "acquire" {
		fmt.Fprintf(&b, ", but validity ran out (%v left)", e.Validity)
	}
	if e.Cause != nil {
		fmt.Fprintf(&b, ": %v", e.Cause)
	}
	if len(e.Nodes) == 0 {
		return b.String()
	}
	b.WriteString(" [")
	for i, n := range e.Nodes {
		if i > 0 {
			b.WriteString("; ")
		}
		switch {
		case n.Err != nil:
			fmt.Fprintf(&b, "%s: %v", n.Addr, n.Err)
		case n.Vote && n.Discounted != nil:
			fmt.Fprintf(&b, "%s: yes, not counted: %v", n.Addr, n.Discounted)
		case n.Vote:
			fmt.Fprintf(&b, "%s: yes %v", n.Addr, n.Latency.Round(time.Microsecond))
		default:
			fmt.Fprintf(&b, "%s: no %v", n.Addr, n.Latency.Round(time.Microsecond))
		}
	}
	b.WriteString("]")
	return b.String()
}

// Unwrap returns the sentinel and, if set, ctx's error.
func (e *QuorumError) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Err, e.Cause}
	}
	return []error{e.Err}
}

func invalid(format string, args ...interface{}) error {
	return fmt.Errorf("%w: "+format, append([]interface{}{ErrInvalidArgument}, args...)...)
}

// shortKey quotes k for a message, cut to its first 64 bytes.
func shortKey(k string) string {
	const most = 64
	if len(k) <= most {
		return fmt.Sprintf("%q", k)
	}
	return fmt.Sprintf("%q... (%d bytes)", k[:most], len(k))
}

// quoteKeys quotes keys for a message: each cut to 64 bytes (shortKey), at
// most 8 of them, so that a message stays short whatever the input.
func quoteKeys(keys []string) string {
	const most = 8
	var b strings.Builder
	b.WriteByte('[')
	for i, k := range keys {
		if i == most {
			fmt.Fprintf(&b, " ... (%d keys)", len(keys))
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(shortKey(k))
	}
	b.WriteByte(']')
	return b.String()
}
