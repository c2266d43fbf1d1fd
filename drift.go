package redlock

import "time"

// The drift budget and validity: the part of a lock's TTL set aside for
// the nodes' clocks running at other rates than the Client's, and what is
// left of a lock once that and the time the attempt took are taken off.
// The drift monitor (driftmon.go) discounts nodes whose clocks run outside
// this budget.

// clockResolution covers Redis's 1 ms expiry resolution.
const clockResolution = 2 * time.Millisecond

// DriftBudget returns the part of ttl that the lock sets aside for clock
// drift between client and nodes: ttl*factor + 2ms.
func DriftBudget(ttl time.Duration, factor float64) time.Duration {
	return time.Duration(float64(ttl)*factor) + clockResolution
}

// validity returns how long a lock acquired with ttl is still safe to use
// once elapsed has passed since the start of the attempt:
// ttl - elapsed - DriftBudget(ttl, factor). Non-positive means the lock must
// not be used.
func validity(ttl, elapsed time.Duration, factor float64) time.Duration {
	return ttl - elapsed - DriftBudget(ttl, factor)
}
