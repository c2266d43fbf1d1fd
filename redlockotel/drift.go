package redlockotel

// drift sums the watched Clients' drift monitors: nodes flagged so far,
// and nodes out of the budget now.
func (m *Metrics) drift() (flagged uint64, out int) {
	for _, c := range m.watched() {
		s := c.Stats().Drift
		flagged += s.Flagged
		for _, n := range s.Nodes {
			if n.Out != nil {
				out++
			}
		}
	}
	return flagged, out
}

// quarantine sums the watched Clients' restart quarantines: quarantines
// begun so far, and nodes quarantined now.
func (m *Metrics) quarantine() (started uint64, now int) {
	for _, c := range m.watched() {
		s := c.Stats().Quarantine
		started += s.Started
		now += s.Now
	}
	return started, now
}
