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

// Grain is the narrowest slot: a deadline d from now is rounded up to the
// next end of a slot of max(Grain, d/32), so a context may end up to that
// much (3 %) after the deadline asked for.
const Grain = time.Millisecond

// Shared hands out contexts ending at shared deadlines. The zero value is
// not usable; make one with New. It is safe for concurrent use.
type Shared struct {
	base  time.Time // slots end at offsets from base (monotonic)
	slots [2]atomic.Pointer[slot]
	next  atomic.Uint32 // which of slots a new slot replaces
}

type slot struct {
	at     time.Duration // its end, from base
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
// Rounds of one kind (acquisitions, releases) share a d, so their slots
// are found again until time moves past one.
func (s *Shared) end(d time.Duration) context.Context {
	g := max(Grain, d/32)
	at := (time.Since(s.base) + d + g - 1) / g * g
	for i := range s.slots {
		if sl := s.slots[i].Load(); sl != nil && sl.at == at {
			return sl.ctx
		}
	}
	sl := &slot{at: at}
	sl.ctx, sl.cancel = context.WithDeadline(context.Background(), s.base.Add(at))
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
