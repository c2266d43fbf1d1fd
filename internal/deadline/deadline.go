// Package deadline hands out node-call contexts whose deadline is shared:
// every context that ends in the same slot (one Grain of time) shares one
// timer, instead of each round starting a timer of its own and stopping
// it when its calls return. Slots are made in increasing order, so a new
// slot's timer is never the runtime's earliest one and does not wake the
// network poller to re-arm it.
package deadline

import (
	"context"
	"sync/atomic"
	"time"
)

// Grain is the width of a slot: a deadline is rounded up to the next slot
// end, so a context may end up to Grain after the deadline asked for.
const Grain = time.Millisecond

// Shared hands out contexts ending at shared deadlines. The zero value is
// not usable; make one with New. It is safe for concurrent use.
type Shared struct {
	base  time.Time // slot k ends at base + k*Grain (monotonic)
	slots [2]atomic.Pointer[slot]
	next  atomic.Uint32 // which of slots a new slot replaces
}

type slot struct {
	k      int64
	ctx    context.Context
	cancel context.CancelFunc // never needed: the timer fires at the deadline
}

// New returns a Shared.
func New() *Shared { return &Shared{base: time.Now()} }

// Within returns a context that carries parent's values but not its
// cancellation, and ends d from now, rounded up to the next slot end.
func (s *Shared) Within(parent context.Context, d time.Duration) context.Context {
	return &within{Context: context.WithoutCancel(parent), end: s.end(d)}
}

// end returns the context of the slot that ends d from now, rounded up.
func (s *Shared) end(d time.Duration) context.Context {
	k := int64((time.Since(s.base) + d + Grain - 1) / Grain)
	for i := range s.slots {
		if sl := s.slots[i].Load(); sl != nil && sl.k == k {
			return sl.ctx
		}
	}
	sl := &slot{k: k}
	sl.ctx, sl.cancel = context.WithDeadline(context.Background(), s.base.Add(time.Duration(k)*Grain))
	s.slots[s.next.Add(1)%uint32(len(s.slots))].Store(sl)
	return sl.ctx
}

// within is a context with its values from one context and its deadline
// from another.
type within struct {
	context.Context // values (the caller's, without its cancellation)
	end             context.Context
}

func (w *within) Deadline() (time.Time, bool) { return w.end.Deadline() }
func (w *within) Done() <-chan struct{}       { return w.end.Done() }
func (w *within) Err() error                  { return w.end.Err() }
