package redlock

import (
	"context"
	"sync"
	"sync/atomic"
)

// releases records this Client's release calls in flight, per node and key,
// so that a later acquisition of the same key on the same node waits for
// them: Release returns at quorum, and without this an immediate TryLock of
// the same key could overtake the release still on its way to a slow node
// and be refused by our own leftover.
//
// Each release has a sequence number, and an acquisition waits only for
// releases registered before it started (mark). A lock's own Release, which
// waits for the lock's acquisition answer on each node, therefore never
// waits on itself. It is safe for concurrent use.
type releases struct {
	seq  atomic.Uint64
	n    atomic.Int64 // registrations in m; lets the common case skip the lock
	mu   sync.Mutex
	m    map[nodeKey]seqs
	wake chan struct{} // closed and cleared when a registration goes; made by a waiter
}

type nodeKey struct {
	node int
	key  string
}

// seqs holds the sequence numbers of one node and key's releases in
// flight; almost always one, kept inline.
type seqs struct {
	first uint64 // 0: none
	rest  []uint64
}

func (s seqs) anyUpTo(mark uint64) bool {
	if s.first != 0 && s.first <= mark {
		return true
	}
	for _, q := range s.rest {
		if q <= mark {
			return true
		}
	}
	return false
}

func (s seqs) without(q uint64) seqs {
	if s.first == q {
		s.first = 0
		if n := len(s.rest); n > 0 {
			s.first, s.rest = s.rest[n-1], s.rest[:n-1]
		}
		return s
	}
	for i, r := range s.rest {
		if r == q {
			s.rest = append(s.rest[:i], s.rest[i+1:]...)
			break
		}
	}
	return s
}

// next returns the sequence number of a release about to be registered.
func (r *releases) next() uint64 { return r.seq.Add(1) }

// mark returns what an acquisition starting now must wait for: every
// release registered so far.
func (r *releases) mark() uint64 { return r.seq.Load() }

// add records release q of keys on node i, before it is sent.
func (r *releases) add(i int, keys []string, q uint64) {
	r.mu.Lock()
	if r.m == nil {
		r.m = make(map[nodeKey]seqs)
	}
	for _, k := range keys {
		nk := nodeKey{i, k}
		s := r.m[nk]
		if s.first == 0 {
			s.first = q
		} else {
			s.rest = append(s.rest, q)
		}
		r.m[nk] = s
	}
	r.n.Add(int64(len(keys)))
	r.mu.Unlock()
}

// done removes what add(i, keys, q) recorded and wakes the waiters.
func (r *releases) done(i int, keys []string, q uint64) {
	r.mu.Lock()
	for _, k := range keys {
		nk := nodeKey{i, k}
		if s := r.m[nk].without(q); s.first == 0 {
			delete(r.m, nk)
		} else {
			r.m[nk] = s
		}
	}
	r.n.Add(-int64(len(keys)))
	if r.wake != nil {
		close(r.wake)
		r.wake = nil
	}
	r.mu.Unlock()
}

// wait blocks until no release of keys on node i registered up to mark is
// in flight, or ctx is done (then it returns ctx's error and the caller
// must not send).
func (r *releases) wait(ctx context.Context, i int, keys []string, mark uint64) error {
	for r.n.Load() > 0 {
		r.mu.Lock()
		busy := false
		for _, k := range keys {
			if r.m[nodeKey{i, k}].anyUpTo(mark) {
				busy = true
				break
			}
		}
		if !busy {
			r.mu.Unlock()
			return nil
		}
		if r.wake == nil {
			r.wake = make(chan struct{})
		}
		wake := r.wake
		r.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
