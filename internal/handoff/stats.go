package handoff

import (
	"sync/atomic"

	"github.com/redlock-go/redlock/observe"
)

// Stats are the Hub's counters since New; the type is the one the Client
// shows (observe.HandoffStats). In the Hub's terms: Local counts Released
// and ReleasedOwner, Promoted a head that left, Timer a Wait's d elapsed,
// Handed a Take after Offer, Duplicates include what ReleasedOwner already
// announced, Stalls twice the HealthCheck without an answer.
type Stats = observe.HandoffStats

type counters struct {
	notified, local, promoted, timer atomic.Uint64
	handed                           atomic.Uint64
	messages, duplicates             atomic.Uint64
	subErrors, recvErrors            atomic.Uint64
	stalls, reconnects               atomic.Uint64
	waiting                          atomic.Int64
}

func (c *counters) woken(r reason) {
	switch r {
	case wokenNotify:
		c.notified.Add(1)
	case wokenLocal:
		c.local.Add(1)
	case wokenLeave:
		c.promoted.Add(1)
	}
}

// Stats returns the Hub's counters. Each is read atomically; together they
// are not one snapshot.
func (h *Hub) Stats() Stats {
	c := &h.st
	return Stats{
		Notified: c.notified.Load(), Local: c.local.Load(), Promoted: c.promoted.Load(), Timer: c.timer.Load(), Handed: c.handed.Load(),
		Messages: c.messages.Load(), Duplicates: c.duplicates.Load(),
		SubscribeErrors: c.subErrors.Load(), ReceiveErrors: c.recvErrors.Load(),
		Stalls: c.stalls.Load(), Reconnects: c.reconnects.Load(),
		Nodes: len(h.subs), Waiting: int(c.waiting.Load()),
	}
}
