package observe

import (
	"errors"
	"fmt"
	"time"
)

// Per-node reasons: the Err or Discounted of a NodeResult in a
// redlock.QuorumError (Lock.Votes, Event.Nodes, NodeEvent.Err) says why
// one node's vote did not count. They never come alone from a call: the
// call's error is a redlock.QuorumError matching redlock.ErrNotObtained,
// ErrNotExtended, ErrLockLost or ErrNotHeld.
var (
	// ErrPending: the node had not answered when the round was decided
	// (its call goes on in the background).
	ErrPending = errors.New("redlock: no answer yet when the round was decided")
	// ErrNodeSkipped: an acquisition or extension did not send to the
	// node: its last call timed out, a probe to it was in flight, and the
	// other nodes could make the quorum. Nothing needs undoing there.
	ErrNodeSkipped = errors.New("redlock: node skipped: its last call timed out and a probe is in flight")
	// ErrNodeQuarantined: the node restarted (or, in strict mode, started)
	// less than the quarantine window ago and may have lost the keys it
	// held. See *QuarantineError and redlock.WithRestartQuarantine.
	ErrNodeQuarantined = errors.New("redlock: node quarantined after a restart")
	// ErrSameServer: the node is the same server (same run_id) as an
	// earlier node under another address; one server must not cast two
	// votes. See *SameServerError.
	ErrSameServer = errors.New("redlock: node is the same server as another node")
	// ErrClockDrift: the drift monitor found the node's clock outside the
	// drift budget (1 - clientRate/nodeRate beyond the drift factor), or
	// it jumped. See *DriftError and redlock.WithDrift.
	ErrClockDrift = errors.New("redlock: node clock outside the drift budget")
	// ErrNotDurable: with redlock.WithDurableVotes, the node did not
	// confirm its vote on disk; its error says why: WAITAOF refused, not
	// answered by the node's deadline, or not fsynced within its timeout.
	ErrNotDurable = errors.New("redlock: vote not confirmed on the node's disk")
	// ErrFenceNotRaised: a fenced acquisition's lock had already expired
	// on the node when its fence register was to be raised to the token.
	ErrFenceNotRaised = errors.New("redlock: fence register not raised: the lock was no longer held on the node")
)

// QuarantineError says which node is quarantined, why, until when (on
// the Client's clock) and which bound set the window. It matches
// ErrNodeQuarantined.
type QuarantineError struct {
	Addr   string
	Until  time.Time
	Reason string // "restart observed", "started after this Client", "fresh start", ...
	Bound  string // BoundRegister, BoundOwnTTL or BoundSetting; "" while the registers are read
}

func (e *QuarantineError) Error() string {
	s := fmt.Sprintf("redlock: node %s quarantined (%s) until %s", e.Addr, e.Reason, e.Until.Format(time.RFC3339Nano))
	if e.Bound != "" {
		s += " (window set by the " + e.Bound + ")"
	}
	return s
}

// Is makes a *QuarantineError match ErrNodeQuarantined.
func (e *QuarantineError) Is(target error) bool { return target == ErrNodeQuarantined }

// SameServerError names the two addresses of one server. It matches
// ErrSameServer.
type SameServerError struct {
	Addr, Other, RunID string
}

func (e *SameServerError) Error() string {
	return fmt.Sprintf("redlock: node %s is the same server as node %s (run_id %s): its vote does not count", e.Addr, e.Other, e.RunID)
}

// Is makes a *SameServerError match ErrSameServer.
func (e *SameServerError) Is(target error) bool { return target == ErrSameServer }

// DriftError says which node's clock is out of bounds and by how much. It
// matches ErrClockDrift. (The estimated error is the field Drift: a field
// named Error would clash with the method.)
type DriftError struct {
	Addr string
	// Drift is the estimated 1 - clientRate/nodeRate (0.2: the Client's
	// clock runs 20% slow against the node's; 0 after a jump, until the
	// rate is estimated again).
	Drift float64
	// Budget is the drift factor the Client was configured with.
	Budget float64
	// Jump is the size of the clock step the node made (positive:
	// forward), when a jump is why; else 0.
	Jump time.Duration
}

func (e *DriftError) Error() string {
	if e.Jump != 0 {
		return fmt.Sprintf("redlock: node %s clock jumped by %v; its rate is not known again yet", e.Addr, e.Jump)
	}
	return fmt.Sprintf("redlock: node %s clock drift %.4f (1 - clientRate/nodeRate) beyond the budget %.4f", e.Addr, e.Drift, e.Budget)
}

// Is makes a *DriftError match ErrClockDrift.
func (e *DriftError) Is(target error) bool { return target == ErrClockDrift }
