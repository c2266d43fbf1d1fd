package redlock

import (
	"context"
	mrand "math/rand/v2"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/spec"
	"github.com/redlock-go/redlock/observe"
)

// Permits makes the call take one of n permits of a semaphore named by the
// key: at most n holders at once. Permit i is a plain lock of its own on
// admin.PermitKey(key, i), with the plain lock's guarantee; an attempt tries the
// permits one round each, starting at a random one. Lock.Key returns the
// permit's key. Every holder must use the same n: lowering n leaves the
// holders of permits at or above the new n in (at most old n until they
// release), raising it admits more at once. n must be at least 1. A call
// whose ctx carries this Client's permit of a semaphore of one fails with
// ErrHeldByCaller: it could only wait for itself. One key per call.
func Permits(n int) LockOption { return kindOption(semaphore{permits: n}) }

// permitKey is the key of permit i of the semaphore key
// (admin.PermitKey).
func permitKey(key string, i int) string { return spec.PermitKey(key, i) }

// semaphore is n plain locks, one per permit; a release of any permit
// wakes the semaphore's waiters.
type semaphore struct {
	plain
	permits int
}

func (semaphore) is() traits {
	return traits{kind: observe.KindSemaphore, tryFirst: true, runs: true, shared: true}
}

// check refuses a semaphore of no permit.
func (s semaphore) check(*Client, *request) error {
	if s.permits < 1 {
		return invalid("permits %d must be at least 1", s.permits)
	}
	return nil
}

// enter takes another permit beside the one the caller holds, unless
// there is no other.
func (s semaphore) enter(r *request, parent *Lock) error {
	if parent.Kind() != observe.KindSemaphore || s.permits <= 1 {
		return heldByCaller(r, parent)
	}
	return nil
}

// attempt tries the permits one round each, from a random one, until one
// is won.
func (s semaphore) attempt(ctx context.Context, c *Client, r *request, n int) (result, error) {
	from := mrand.IntN(s.permits)
	var res result
	for j := 0; j < s.permits; j++ {
		var err error
		key := permitKey(r.keys[0], (from+j)%s.permits)
		if res, err = c.attemptKeys(ctx, r, []string{key}, n); err != nil || res.lock != nil || res.cause != nil {
			return res, err
		}
	}
	return res, nil
}

// waitKey is the channel every permit's release is announced on: no
// lock uses it.
func (semaphore) waitKey(key string) string { return "{" + key + "}:permits" }

func (s semaphore) release(l *Lock, announce bool) *node.Cmd {
	if !announce {
		return node.Release(l.keys, l.owner, false)
	}
	return node.ReleaseAnnouncing(l.keys[0], l.owner, s.waitKey(l.name))
}
