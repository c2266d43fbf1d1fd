package redlock

import (
	"github.com/redlock-go/redlock/internal/node"

	"github.com/redlock-go/redlock/observe"
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
func Reentrant() LockOption { return kindOption(reentrant{}) }

// reentrant is a hash of entries on each node (reentrant_lock.lua):
// entries of one hold share the key; each has its own owner value and
// lease, so none is handed on locally.
type reentrant struct{ typed }

func (reentrant) is() traits { return traits{kind: observe.KindReentrant, tryFirst: true} }

// enter enters the hold of a reentrant parent (one attempt, no wait); a
// hold found lost fails before any traffic.
func (reentrant) enter(r *request, parent *Lock) error {
	if parent.Kind() != observe.KindReentrant {
		return heldByCaller(r, parent)
	}
	if err := parent.Err(); err != nil {
		return &QuorumError{Op: observe.OpAcquire, Keys: r.keys, Need: parent.c.need, Err: ErrNotObtained, Cause: err}
	}
	r.hold, r.retry = parent.hold, false
	return nil
}

func (reentrant) command(_ *Client, r *request, keys []string, owner string) (cmd, again *node.Cmd) {
	hold := r.hold
	if hold == "" {
		hold = owner // a new hold is named by its first entry
	}
	cmd = node.ReentrantLock(keys[0], owner, r.ttl, hold)
	return cmd, cmd
}
