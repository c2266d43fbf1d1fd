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
	v, err := s.conn.Do(ctx, "pubsub", "numsub", ch)
	if err != nil {
		return false, err
	}
	return numSub(v, ch) > 1, nil
}

// numSub reads PUBSUB NUMSUB's reply (channel, count pairs: a flat array,
// or a map in RESP3) for ch.
func numSub(v any, ch string) int64 {
	switch x := v.(type) {
	case []any:
		for i := 0; i+1 < len(x); i += 2 {
			if c, _ := x[i].(string); c == ch {
				n, _ := x[i+1].(int64)
				return n
			}
		}
	case map[string]any:
		n, _ := x[ch].(int64)
		return n
	}
	return 0
}
