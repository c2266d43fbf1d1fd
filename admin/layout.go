package admin

import (
	"time"

	"github.com/redlock-go/redlock/internal/spec"
)

// What a Client assumes and keeps, for tools that judge a deployment
// without a Client (redlock doctor, redlock inspect).
const (
	// DefaultNodeTimeout is a Client's per-node timeout when
	// redlock.WithNodeTimeout is not given.
	DefaultNodeTimeout = spec.DefaultNodeTimeout
	// DefaultDriftFactor is a Client's drift factor when
	// redlock.WithDrift sets no Factor.
	DefaultDriftFactor = spec.DefaultDriftFactor
	// FairWaiterTimeout is how long a fair lock's waiter (redlock.Fair)
	// keeps its place in the queue without trying: a waiter whose process
	// died is dropped after it, so it delays the next waiter by at most
	// FairWaiterTimeout plus one retry of that waiter. A fair waiter
	// retries at least every FairWaiterTimeout/10 whatever
	// redlock.WithRetryBackoff says (its backoff max is capped there), so
	// a live waiter keeps its place with ten tries to spare. Redisson's
	// fair lock uses 5 s in its docs and 5 min in its code; 3 s bounds the
	// stall a dead waiter causes to about one typical critical section
	// while leaving a loaded process time to come back.
	FairWaiterTimeout = spec.FairWaiterTimeout
	// FenceMargin is how much longer than the lock's TTL a fence register
	// lives after each write (redlock.WithFencing), and so the bound on
	// how much node clocks may differ from each other for tokens to keep
	// increasing once registers expired. `redlock doctor` warns when node
	// clocks differ by more than half of it or step back.
	FenceMargin = spec.FenceMargin
)

// DriftBudget returns the part of ttl that a lock sets aside for clock
// drift between client and nodes: ttl*factor + 2ms. A lock acquired with
// ttl is valid for at most ttl - DriftBudget(ttl, factor) after its
// attempt began.
func DriftBudget(ttl time.Duration, factor float64) time.Duration {
	return spec.DriftBudget(ttl, factor)
}

// FenceKey returns the key of the fence register of lock key k
// (redlock.WithFencing): k with the suffix ":fence", and k in braces when
// k has no hash tag, so that on a Redis Cluster the register shares k's
// hash slot. Inspect it with GET.
func FenceKey(k string) string { return spec.FenceKey(k) }

// PermitKey returns the key of permit i of the semaphore key (see
// redlock.Permits): "{key}:permit:i", in the key's hash slot on a cluster.
func PermitKey(key string, i int) string { return spec.PermitKey(key, i) }

// SplitOwner splits an owner value found on a node into the instance id of
// the Client that wrote it (redlock.Client.ID) and the attempt's random
// part. A value without an instance id (written by an older version, or
// not by this library) yields an empty client.
func SplitOwner(v string) (client, attempt string) { return spec.SplitOwner(v) }
