package redlock

import "github.com/redlock-go/redlock/observe"

// Stats returns what the Client has seen so far: its waiting Lock calls
// and local hand-offs, the restart quarantine's windows and the drift
// monitor's estimates (see package observe). It is safe for concurrent use
// and sends nothing.
func (c *Client) Stats() observe.Stats {
	return observe.Stats{Handoff: c.hub.Stats(), Quarantine: c.quarantineStats(), Drift: c.driftStats()}
}
