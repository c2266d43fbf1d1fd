// Package observe holds the types through which a redlock.Client shows
// what it does, for logs, metrics, traces and operators; a program that
// only locks needs none of them.
//
//   - Event, one finished operation (acquire, extend, renew, release, lost),
//     and NodeEvent, one node call: what redlock.WithObserver and
//     redlock.WithNodeObserver hand to their functions.
//   - NodeResult, one node's answer in a round: Event.Nodes,
//     redlock.QuorumError.Nodes, Lock.Votes.
//   - Op and Kind, what an operation did and a lock's type.
//   - The per-node reasons (ErrPending, ErrNodeSkipped, ErrNodeQuarantined,
//     ErrSameServer, ErrClockDrift, ErrNotDurable, ErrFenceNotRaised) and
//     their detail (QuarantineError, SameServerError, DriftError): why one
//     node's vote did not count, in a NodeResult's Err or Discounted.
//   - Stats, what redlock.Client.Stats returns: local waits and hand-offs,
//     the restart quarantine's windows (and the Bound values that say what
//     set them), the drift monitor's estimates.
//
// The package imports nothing of redlock (redlock imports it), so Event.Lock
// is the interface Lock, which a *redlock.Lock implements.
package observe
