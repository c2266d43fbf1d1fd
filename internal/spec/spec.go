// Package spec holds what the root package and package admin must agree
// on: the defaults an operator's tool assumes, the limits a Client keeps,
// the layout of the keys and values a lock leaves on the nodes, and the
// drift budget. The root package keeps them unexported; package admin
// shows them to operators.
package spec

import (
	"strconv"
	"strings"
	"time"

	"github.com/redlock-go/redlock/internal/node"
)

const (
	// DefaultNodeTimeout is a Client's default per-node timeout
	// (WithNodeTimeout).
	DefaultNodeTimeout = 50 * time.Millisecond
	// DefaultDriftFactor is a Client's default drift factor
	// (Drift.Factor).
	DefaultDriftFactor = 0.01
	// FairWaiterTimeout is how long a fair lock's waiter keeps its place
	// in the queue without trying.
	FairWaiterTimeout = 3 * time.Second
	// FenceMargin is how much longer than the lock's TTL a fence register
	// lives after each write.
	FenceMargin = time.Hour
)

// clockResolution covers Redis's 1 ms expiry resolution.
const clockResolution = 2 * time.Millisecond

// DriftBudget returns the part of ttl that a lock sets aside for clock
// drift between client and nodes: ttl*factor + 2ms.
func DriftBudget(ttl time.Duration, factor float64) time.Duration {
	return time.Duration(float64(ttl)*factor) + clockResolution
}

// FenceKey returns the key of the fence register of lock key k.
func FenceKey(k string) string {
	if _, ok := node.HashTag(k); ok {
		return k + ":fence"
	}
	return "{" + k + "}:fence"
}

// PermitKey returns the key of permit i of the semaphore key.
func PermitKey(key string, i int) string { return "{" + key + "}:permit:" + strconv.Itoa(i) }

// SplitOwner splits an owner value into the writer's instance id and the
// attempt's random part.
func SplitOwner(v string) (client, attempt string) {
	i := strings.LastIndexByte(v, ':')
	if i < 0 {
		return "", v
	}
	return v[:i], v[i+1:]
}
