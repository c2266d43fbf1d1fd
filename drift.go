package redlock

import (
	"time"

	"github.com/redlock-go/redlock/internal/spec"
)

// The drift budget and validity: the part of a lock's TTL set aside for
// the nodes' clocks running at other rates than the Client's, and what is
// left of a lock once that and the time the attempt took are taken off.
// The drift monitor (driftmon.go) discounts nodes whose clocks run outside
// this budget.

// driftBudget returns the part of ttl that the lock sets aside for clock
// drift between client and nodes: ttl*factor + 2ms (admin.DriftBudget).
func driftBudget(ttl time.Duration, factor float64) time.Duration {
	return spec.DriftBudget(ttl, factor)
}

// validity returns how long a lock acquired with ttl is still safe to use
// once elapsed has passed since the start of the attempt:
// ttl - elapsed - driftBudget(ttl, factor). Non-positive means the lock must
// not be used.
func validity(ttl, elapsed time.Duration, factor float64) time.Duration {
	return ttl - elapsed - driftBudget(ttl, factor)
}
