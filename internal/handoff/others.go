package handoff

import (
	"context"
	"errors"
)

// ErrNoSubscriber is the error of Others when the Hub has no node to ask
// (no plain client: see New).
var ErrNoSubscriber = errors.New("redlock: handoff: no node to count subscribers on")

// Others reports whether a waiter of another Hub (another process) waits
// for key: one node, a different one each call, counts more subscribers
// of Channel(key) than this Hub's own (PUBSUB NUMSUB), bounded by ctx. It
// is a hint: a waiter whose subscription is not in place, or that waits
// without one (a Client whose subscriptions are refused, or on cluster
// nodes), is not seen. A Watch of key counts as a waiter. Call it while this Hub has a waiter for key (it is then one
// subscriber itself). It returns the node's error, or ErrNoSubscriber;
// safe for concurrent use.
func (h *Hub) Others(ctx context.Context, key string) (bool, error) {
	if len(h.subs) == 0 {
		return false, ErrNoSubscriber
	}
	s := h.subs[int(h.asked.Add(1)-1)%len(h.subs)]
	ch := Channel(key)
	n, err := s.client.PubSubNumSub(ctx, ch).Result()
	if err != nil {
		return false, err
	}
	return n[ch] > 1, nil
}
