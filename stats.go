package redlock

import "github.com/redlock-go/redlock/internal/handoff"

// HandoffStats counts this Client's waiting Lock calls: how their waits
// ended (a node's release notification, a release by this Client, the
// previous waiter leaving, the backoff timer), locks passed between its
// waiters, and the health of its pub/sub connections.
type HandoffStats = handoff.Stats

// Stats is what a Client has seen so far (Client.Stats).
type Stats struct {
	Handoff    HandoffStats    // waiting Lock calls and local hand-offs
	Quarantine QuarantineStats // the restart quarantine; zero when it is off
	Drift      DriftStats      // the drift monitor; zero when it is off
}

// Stats returns what the Client has seen so far. It is safe for concurrent
// use and sends nothing.
func (c *Client) Stats() Stats {
	return Stats{Handoff: c.hub.Stats(), Quarantine: c.quarantineStats(), Drift: c.driftStats()}
}
