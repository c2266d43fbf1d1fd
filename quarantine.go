package redlock

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redlock-go/redlock/clock"
	"github.com/redlock-go/redlock/node"
)

// ErrNodeQuarantined matches a node's vote that does not count because the
// node restarted (or, in strict mode, started) less than the quarantine
// window ago and may have lost the keys it held. See *QuarantineError.
var ErrNodeQuarantined = errors.New("redlock: node quarantined after a restart")

// ErrSameServer matches the vote of a node that is the same server (same
// run_id) as an earlier node under another address: one server must not
// cast two votes.
var ErrSameServer = errors.New("redlock: node is the same server as another node")

// QuarantineError says which node is quarantined, why, and until when (on
// the Client's clock). It matches ErrNodeQuarantined.
type QuarantineError struct {
	Addr   string
	Until  time.Time
	Reason string // "restart observed" or "fresh start"
}

func (e *QuarantineError) Error() string {
	return fmt.Sprintf("redlock: node %s quarantined (%s) until %s", e.Addr, e.Reason, e.Until.Format(time.RFC3339Nano))
}

// Is makes a *QuarantineError match ErrNodeQuarantined.
func (e *QuarantineError) Is(target error) bool { return target == ErrNodeQuarantined }

// SameServerError names the two addresses of one server. It matches
// ErrSameServer.
type SameServerError struct {
	Addr, Other, RunID string
}

func (e *SameServerError) Error() string {
	return fmt.Sprintf("redlock: node %s is the same server as node %s (run_id %s): its vote does not count", e.Addr, e.Other, e.RunID)
}

// Is makes a *SameServerError match ErrSameServer.
func (e *SameServerError) Is(target error) bool { return target == ErrSameServer }

// quarantine is the gate that discounts nodes that restarted less than the
// window ago (without appendfsync always), and second addresses of one
// server. It is safe for concurrent use.
type quarantine struct {
	clock  clock.Clock
	addrs  []string
	window func() time.Duration // the longest TTL used so far, or a fixed window
	fresh  bool                 // strict mode: also quarantine nodes first met young
	mu     sync.Mutex
	ids    []node.Identity // last identity learned per node; RunID "" = never
	until  []time.Time     // end of each node's quarantine; zero = none
	reason []string
}

func newQuarantine(c clock.Clock, addrs []string, window func() time.Duration, fresh bool) *quarantine {
	n := len(addrs)
	return &quarantine{clock: c, addrs: addrs, window: window, fresh: fresh,
		ids: make([]node.Identity, n), until: make([]time.Time, n), reason: make([]string, n)}
}

// learn records node i's identity, read just now. It returns the end of a
// quarantine it started (zero if none): a node whose run_id changed since
// it was last learned restarted, and what it held may be gone; it stays out
// until window - uptime from now, i.e. one window after its start. A
// durable node (appendonly, appendfsync always) lost nothing.
func (q *quarantine) learn(i int, id node.Identity) time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	prev := q.ids[i]
	q.ids[i] = id
	if prev.RunID == id.RunID || id.Durable() {
		return time.Time{}
	}
	reason := "restart observed"
	if prev.RunID == "" {
		if !q.fresh {
			return time.Time{}
		}
		reason = "fresh start"
	}
	w := q.window()
	if w <= 0 || id.Uptime >= w {
		return time.Time{}
	}
	q.until[i] = q.clock.Now().Add(w - id.Uptime)
	q.reason[i] = reason
	return q.until[i]
}

// discount is the gate: node i's vote does not count while it is
// quarantined, or when an earlier node has its run_id.
func (q *quarantine) discount(i int) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if r := q.ids[i].RunID; r != "" {
		for j := 0; j < i; j++ {
			if q.ids[j].RunID == r {
				return &SameServerError{Addr: q.addrs[i], Other: q.addrs[j], RunID: r}
			}
		}
	}
	if u := q.until[i]; !u.IsZero() && q.clock.Now().Before(u) {
		return &QuarantineError{Addr: q.addrs[i], Until: u, Reason: q.reason[i]}
	}
	return nil
}
