package redlock

import (
	"errors"

	"github.com/redlock-go/redlock/internal/node"
)

// notSentError is the error of a node call whose command was not sent, so
// that nothing of it can be on the node and nothing needs undoing there.
// asked is set when the node was asked something else first (its
// identity): such a call still tells about the node's health, and node
// observers hear of it.
type notSentError struct {
	msg   string
	why   string // msg in the caller's words, for a QuorumError's clause
	err   error  // the cause, or nil
	is    error  // the sentinel it matches (errors.Is), or nil
	asked bool
}

func (e *notSentError) Error() string {
	if e.err == nil {
		return e.msg
	}
	return e.msg + ": " + e.err.Error()
}

func (e *notSentError) Unwrap() error { return e.err }

func (e *notSentError) Is(target error) bool { return e.is != nil && target == e.is }

var (
	// errNotSent marks a node call that was skipped because nothing of
	// ours can be there.
	errNotSent error = &notSentError{msg: "redlock: not sent", why: "nothing of ours there"}
	// errReleasePending is the error of an acquisition call that was not
	// sent because this Client's own release of the key on that node was
	// still in flight at the node deadline (sending it would race the
	// release).
	errReleasePending error = &notSentError{msg: "redlock: not sent: this client's release of the key on this node was still in flight",
		why: "our release there was still in flight"}
)

// gated returns the error of an acquisition call to the node at addr not
// sent because of what identifyFirst found (what; why says it in the
// caller's words, "" if the cause says it all), with its cause: a timeout
// (the node is then probed, see nodeHealth) or the gate's error.
func gated(addr, what, why string, cause error) error {
	return &notSentError{msg: "redlock: not sent to node " + addr + ": " + what, why: why, err: cause, asked: true}
}

// notSent reports whether err is the error of a node call whose command
// was never sent: a notSentError, or a call whose deadline passed while
// it was queued behind the node's pipeline (node.NotSent).
func notSent(err error) bool {
	if err == nil {
		return false
	}
	if _, ok := asNotSent(err); ok {
		return true
	}
	return node.NotSent(err)
}

// untouched reports a not-sent call that did not reach its node at all
// (no identification, no place in its queue): the node's health is
// unknown from it, and node observers are not told.
func untouched(err error) bool {
	e, ok := asNotSent(err)
	return ok && !e.asked
}

// asNotSent finds a *notSentError in err's chain without errors.As (whose
// target would escape: one allocation per failed call).
func asNotSent(err error) (*notSentError, bool) {
	for err != nil {
		if e, ok := err.(*notSentError); ok {
			return e, true
		}
		err = errors.Unwrap(err)
	}
	return nil, false
}
