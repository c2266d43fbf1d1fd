package observe

import "time"

// Stats is what a Client has seen so far (redlock.Client.Stats).
type Stats struct {
	Handoff    HandoffStats    // waiting Lock calls and local hand-offs
	Quarantine QuarantineStats // the restart quarantine; zero when it is off
	Drift      DriftStats      // the drift monitor; zero when it is off
}

// HandoffStats counts a Client's waiting Lock calls: how their waits ended,
// locks passed between its waiters, and the health of its pub/sub
// connections, since the Client was made.
type HandoffStats struct {
	// Waits that ended, by what ended them (a wait that found nothing
	// pending, or that ended with an error, is not counted):
	Notified uint64 // a node's release notification
	Local    uint64 // a release by this Client
	Promoted uint64 // the previous waiter left, so this one became first
	Timer    uint64 // the backoff timer: the polling fallback
	// Handed is locks that a waiter took from a release inside this
	// Client, with no round trip to the nodes (redlock.WithLocalHandoff).
	Handed uint64

	// Messages is every release notification received from the nodes
	// (for keys with or without local waiters, duplicates included).
	Messages uint64
	// Duplicates is the notifications dropped because their payload (the
	// released lock's owner value) was the one the key's waiters were last
	// woken with: the same release, seen on another node or already
	// announced by this Client.
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
	// to a PING, arrived for twice the health-check interval.
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

// The bounds that can set a restarted node's window (NodeWindow.Bound,
// QuarantineError.Bound).
const (
	// BoundRegister: the other nodes' TTL registers showed which locks
	// the node may have held (see redlock.WithRestartQuarantine).
	BoundRegister = "register"
	// BoundSetting: the deployment setting (WithRestartQuarantine's
	// window), used when the registers could not show a bound.
	BoundSetting = "setting"
	// BoundOwnTTL: the Client's longest TTL, when it is longer than the
	// setting and the registers could not show a bound.
	BoundOwnTTL = "own TTL"
	// BoundDurable: the node kept its votes (durable votes, its
	// append-only file loaded) and every register read showed only
	// locks with durable votes: no window (see redlock.WithDurableVotes).
	BoundDurable = "durable votes"
)

// QuarantineStats is what the restart quarantine has seen (see
// redlock.WithRestartQuarantine).
type QuarantineStats struct {
	Started uint64 // quarantines begun: restarts, fail-overs, nodes started after the Client, fresh nodes in strict mode
	Aliases uint64 // nodes found to be a server that an earlier node already is (same run_id)
	Now     int    // nodes quarantined now
	// Windows set by each bound: the registers (a proof), the Client's
	// longest TTL, the deployment setting (the fallback). A window first
	// set by the fallback and shortened by a later proof counts twice.
	ByRegister, ByOwnTTL, BySetting uint64
	ByDurable                       uint64       // restarts exempt: the node kept its durable votes (BoundDurable)
	Nodes                           []NodeWindow // per node, in node order: its latest window
}

// NodeWindow is one node's latest restart quarantine window.
type NodeWindow struct {
	Addr    string
	Until   time.Time // end of the window on the Client's clock; zero if never quarantined
	Bound   string    // BoundRegister, BoundOwnTTL, BoundSetting; "" never or pending
	Reason  string
	Pending bool // the registers are being read: the node does not count meanwhile
}

// DriftStats is what the drift monitor has seen (see
// redlock.WithDrift).
type DriftStats struct {
	Samples  uint64      // TIME answers fed to the estimators
	Failures uint64      // TIME calls that failed or timed out
	Flagged  uint64      // times a node went out of bounds (drift beyond the factor, or a jump)
	Jumps    uint64      // clock jumps detected
	Nodes    []NodeDrift // per node, in node order; nil when the monitor is off
}

// NodeDrift is the drift monitor's estimate for one node.
type NodeDrift struct {
	Addr  string
	Known bool    // the rate is estimated within the tolerance (half the drift factor)
	Rate  float64 // nodeRate/clientRate: the estimate so far (1 before two samples give one)
	Drift float64 // 1 - clientRate/nodeRate; positive: the Client's clock runs slow (the unsafe side)
	Bound float64 // half-width of the interval that holds the true Drift
	Out   error   // a *DriftError while out of bounds, else nil
}
