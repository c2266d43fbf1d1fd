package redlock

// A gate decides whether a node's yes counts toward the quorum right now
// (restart quarantine, a second address of one server, clock drift). A
// discounted node still receives every command, so that what it holds is
// known and released, but its vote is not counted until the gate clears.
type gate interface {
	// discount returns why node i's yes does not count now, or nil.
	discount(i int) error
}

// discount returns why node i's yes does not count toward a quorum now,
// from the first gate that refuses it, or nil.
func (c *Client) discount(i int) error {
	for _, g := range c.gates {
		if err := g.discount(i); err != nil {
			return err
		}
	}
	return nil
}

// counts is quorum.Config.Counts for rounds that grant or keep a lock:
// nil for releases and when no gate is configured, so that a round asks
// nothing.
func (c *Client) counts(o op) func(int) bool {
	if o == opRelease {
		return nil
	}
	return c.countsFn
}
