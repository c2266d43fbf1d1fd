package handoff

import (
	"context"
	"errors"
	"math/bits"
	"slices"
	"time"
)

// Watch is a waiter that stands in no local queue: a call that waits for
// several keys at once, which cannot be the head of each key's queue. While
// it stands, the Hub subscribes to each of its keys' channels, so that the
// release of any of them wakes it (once Config.Quorum nodes announced it)
// and so that other processes count it among the key's waiters (Others).
// It is never handed a lock (Offer), and a local queue's head does not
// wait for it.
type Watch struct {
	h    *Hub
	keys []string // sorted, without repeats
	wake chan struct{}
	left bool // guarded by Hub.mu
}

// watchKey is the Hub's record of the Watches of one key. Guarded by
// Hub.mu.
type watchKey struct {
	ws       []*Watch
	last     string // payload of the last release that woke them, to drop repeats
	counting string // payload whose notifications are being counted toward the quorum
	seen     uint64 // nodes (sub index) that sent it
}

// Watch starts a Watch of keys. Like Enter, it never blocks on the
// network: the subscriptions are sent in the background. The caller must
// call Leave when done.
func (h *Hub) Watch(keys []string) *Watch {
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	w := &Watch{h: h, keys: slices.Compact(sorted), wake: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		w.left = true
		return w
	}
	if h.watched == nil {
		h.watched = make(map[string]*watchKey)
	}
	for _, k := range w.keys {
		wk := h.watched[k]
		if wk == nil {
			wk = &watchKey{}
			h.watched[k] = wk
			if h.keys[k] == nil {
				h.want(k, true)
			}
		}
		wk.ws = append(wk.ws, w)
	}
	return w
}

// Watched reports whether a Watch of key stands now.
func (h *Hub) Watched(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.watched[key] != nil
}

// Wait blocks until a release of one of w's keys is announced, d has
// elapsed, ctx is done, or the Hub is closed. An announcement that came
// since the last Wait returned ends it at once. woken is true when an
// announcement ended it. The error is ctx's, ErrClosed after Close, or
// ErrLeft after Leave.
func (w *Watch) Wait(ctx context.Context, d time.Duration) (woken bool, err error) {
	if ctx == nil {
		return false, errors.New("redlock: handoff: nil context")
	}
	if err := w.stopped(ctx); err != nil {
		return false, err
	}
	timer := time.NewTimer(max(d, 0))
	defer timer.Stop()
	select {
	case <-w.wake:
		if err := w.stopped(ctx); err != nil { // Leave signals too
			return false, err
		}
		w.h.st.woken(wokenNotify)
		return true, nil
	case <-timer.C:
		w.h.st.timer.Add(1)
		return false, nil
	case <-ctx.Done():
	case <-w.h.ctx.Done():
	}
	return false, w.stopped(ctx)
}

// stopped returns why Wait must return now, if it must.
func (w *Watch) stopped(ctx context.Context) error {
	w.h.mu.Lock()
	defer w.h.mu.Unlock()
	switch {
	case w.h.closed:
		return ErrClosed
	case w.left:
		return ErrLeft
	}
	return ctx.Err()
}

// Leave ends w: a Wait in progress returns ErrLeft, and the channel of a
// key that no one waits for any more is unsubscribed (in the background).
// Idempotent; it never blocks on the network.
func (w *Watch) Leave() {
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.left {
		return
	}
	w.left = true
	signal(w.wake)
	for _, k := range w.keys {
		wk := h.watched[k]
		if wk == nil {
			continue
		}
		wk.ws = slices.DeleteFunc(wk.ws, func(x *Watch) bool { return x == w })
		if len(wk.ws) == 0 {
			delete(h.watched, k)
			if h.keys[k] == nil {
				h.want(k, false)
			}
		}
	}
}

// heard counts a notification with payload from node sub idx, and reports
// whether it wakes the key's Watches: a release without a payload at
// once, one with a payload once quorum nodes sent it, and once only.
func (wk *watchKey) heard(idx int, payload string, quorum int) bool {
	if payload == "" {
		return true
	}
	if payload == wk.last {
		return false
	}
	if quorum > 1 {
		if payload != wk.counting {
			wk.counting, wk.seen = payload, 0
		}
		wk.seen |= 1 << (idx % 64)
		if bits.OnesCount64(wk.seen) < quorum {
			return false
		}
	}
	wk.last = payload
	return true
}
