package redlockotel

import (
	"context"
	"errors"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe"
)

// outcomes lists every value Outcome returns.
var outcomes = []string{"acquired", "held", "unavailable", "validity_expired", "canceled", "deadline",
	"extended", "not_extended", "max_hold", "lost", "not_held", "released", "ok", "error", "wrong_type"}

// Outcome classifies an event as the redlock.outcome attribute does (see
// the package documentation). Unknown errors give "error".
func Outcome(e observe.Event) string {
	if e.Err == nil {
		switch e.Op {
		case "acquire":
			return "acquired"
		case "extend", "renew":
			return "extended"
		case "release":
			return "released"
		}
		return "ok"
	}
	var qe *redlock.QuorumError
	isQE := errors.As(e.Err, &qe)
	switch e.Op {
	case "acquire":
		switch {
		case !isQE:
			return "error"
		case errors.Is(qe.Cause, redlock.ErrWrongType):
			return "wrong_type"
		case errors.Is(qe.Cause, context.Canceled):
			return "canceled"
		case qe.Cause != nil:
			return "deadline"
		case qe.Got >= qe.Need:
			return "validity_expired"
		case heldElsewhere(qe):
			return "held"
		}
		return "unavailable"
	case "lost":
		return "lost"
	case "extend", "renew":
		switch {
		case errors.Is(e.Err, redlock.ErrMaxHold):
			return "max_hold"
		case errors.Is(e.Err, redlock.ErrLockLost):
			return "lost"
		case errors.Is(e.Err, redlock.ErrNotHeld):
			return "not_held"
		case isQE && qe.Cause != nil:
			return "canceled" // the caller's ctx ended it
		case errors.Is(e.Err, redlock.ErrNotExtended):
			return "not_extended"
		}
	case "release":
		if errors.Is(e.Err, redlock.ErrNotHeld) {
			return "not_held"
		}
	}
	return "error"
}

// heldElsewhere reports whether the key is held by another client rather
// than the nodes unreachable: some node answered no, and the nodes that
// failed could not have made the quorum even had each said yes. A node
// down beside a held key (a tolerated minority outage) is still "held";
// nodes not yet answered when the round was decided count for neither.
func heldElsewhere(qe *redlock.QuorumError) bool {
	no, yes, failed := 0, 0, 0
	for _, n := range qe.Nodes {
		switch {
		case n.Vote:
			yes++
		case n.Err == nil:
			no++
		case !errors.Is(n.Err, observe.ErrPending):
			failed++
		}
	}
	return no > 0 && yes+failed < qe.Need
}

// nodeErrorType returns the error.type of a node call, or "" if it
// succeeded.
func nodeErrorType(e observe.NodeEvent) string {
	if e.Err == nil {
		return ""
	}
	return errorType(e.Timeout())
}
