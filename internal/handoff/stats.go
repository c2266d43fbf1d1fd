package handoff

import "sync/atomic"

// Stats are the Hub's counters since New.
type Stats struct {
	// Waits that ended, by what ended them (a Wait with d <= 0 that found
	// nothing pending, or that ended with an error, is not counted):
	Notified uint64 // a node's release notification
	Local    uint64 // Released (or ReleasedOwner) by this process
	Promoted uint64 // the previous head left, so this waiter became head
	Timer    uint64 // d elapsed: the polling fallback
	// Handed is values (locks) that a waiter took (Take) after Offer
	// passed them on, with no round trip to the nodes.
	Handed uint64

	// Messages is every release notification received from the nodes
	// (for keys with or without local waiters, duplicates included).
	Messages uint64
	// Duplicates is the notifications dropped because their payload (the
	// released lock's owner value, if the release script sends it) was the
	// one the key's waiters were last woken with: the same release, seen
	// on another node or already announced by ReleasedOwner.
	Duplicates uint64

	// SubscribeErrors is SUBSCRIBE and UNSUBSCRIBE calls that failed, or
	// commands a node refused (a missing ACL permission): that node's
	// notifications may be missing for a while. After a refusal the node is
	// sent no subscription for a hold-off (1 s doubling up to 1 min).
	SubscribeErrors uint64
	// ReceiveErrors is reads (and health-check PINGs) of a node's pub/sub
	// connection that failed: connection lost, node down (each failed
	// reconnection counts).
	ReceiveErrors uint64
	// Stalls is connections replaced because nothing, not even the answer
	// to a PING, arrived for twice the HealthCheck.
	Stalls uint64
	// Reconnects is how often a node's connection worked again after
	// ReceiveErrors or a Stall.
	Reconnects uint64

	// Nodes is the number of nodes with a pub/sub connection (plain
	// clients); the others are only polled.
	Nodes int
	// Waiting is the number of waiters in the local queues now.
	Waiting int
}

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
