package handoff

import (
	"context"
	"math/bits"
	"strings"
	"time"

	"github.com/redlock-go/redlock/transport"
)

// Waits of a node's reader between failed reads (the node is down: each
// read dials again): doubling from pauseMin up to pauseMax.
const (
	pauseMin = 50 * time.Millisecond
	pauseMax = time.Second
)

// Hold-offs of a node's subscriptions after it refused one (a user
// without the channel permission): doubling from holdMin up to holdMax,
// back to holdMin once a subscription is confirmed.
const (
	holdMin = time.Second
	holdMax = time.Minute
)

// sub is one node's pub/sub connection, run by two goroutines: read
// receives the notifications and dispatches them; sync sends SUBSCRIBE
// and UNSUBSCRIBE as the set of waited-for keys changes, so that neither
// a dead node nor a slow SUBSCRIBE ever holds up EnterWant, Wait or Leave.
//
// go-redis's PubSub reconnects on its own after a failed read or write,
// and then subscribes the new connection to every channel it was asked
// for (also those whose SUBSCRIBE failed; UNSUBSCRIBE forgets a channel
// even if it failed). A connection that stays open but silent (a frozen
// node, a partition that drops packets) gives no error: read detects it
// with a PING and replaces the PubSub, and sync subscribes the new one to
// every key.
//
// A node that refuses a command (an ACL without pub/sub permissions) is
// sent no SUBSCRIBE or UNSUBSCRIBE for a hold-off; then a new PubSub,
// which forgets the refused channels, subscribes every waited-for key.
// Meanwhile nothing is subscribed, so the connection's silence is not
// checked.
type sub struct {
	idx   int // among the Hub's subs
	conn  transport.Conn
	dirty chan struct{} // capacity 1: changes or resync to apply

	// guarded by Hub.mu
	ps      transport.Subscription
	changes map[string]bool // since the last sync: key -> subscribe (true) or unsubscribe
	resync  bool            // ps is new: subscribe every waited-for key
	held    time.Time       // a refusal holds subscriptions back until then; zero: none
	hold    time.Duration   // the last hold-off; zero once a subscription is confirmed
	noPing  bool            // the node refuses PING: silence cannot be told from a stall
}

// readState is what read remembers between two reads.
type readState struct {
	broken bool          // reads failed (or stalled) since the last message
	pinged bool          // a PING is out, nothing came since
	pause  time.Duration // wait after the next failed read
}

// read receives from the node until Close.
func (s *sub) read(h *Hub) {
	defer h.wg.Done()
	var st readState
	for {
		h.mu.Lock()
		ps := s.ps
		h.mu.Unlock()
		// The ctx bounds a dial (and its handshake) that the read makes
		// when the connection is down; the read itself ends at HealthCheck.
		ctx, cancel := context.WithTimeout(h.ctx, 2*h.cfg.HealthCheck)
		msg, err := ps.Receive(ctx, h.cfg.HealthCheck)
		cancel()
		if h.ctx.Err() != nil {
			return
		}
		if err != nil {
			s.failed(h, ps, err, &st)
			continue
		}
		if st.broken {
			h.st.reconnects.Add(1)
		}
		st = readState{}
		switch msg.Kind {
		case transport.Message:
			h.notifyFrom(s.idx, msg)
		case transport.Subscribed:
			h.mu.Lock()
			s.hold = 0
			h.mu.Unlock()
		}
	}
}

// failed handles a failed read of ps.
func (s *sub) failed(h *Hub, ps transport.Subscription, err error, st *readState) {
	switch {
	case s.current(h) != ps:
		// replaced meanwhile (a stall, a hold-off's end): read the new one
	case transport.IsErrorReply(err):
		// The node refused a command sent on the connection (SUBSCRIBE
		// without the channel permission): the connection itself is fine.
		h.st.subErrors.Add(1)
		if st.broken {
			h.st.reconnects.Add(1)
		}
		*st = readState{}
		s.refused(h, err)
	case timeout(err) && !s.checked(h):
		st.pinged = false
	case timeout(err) && !st.pinged:
		st.pinged = true
		ctx, cancel := context.WithTimeout(h.ctx, h.cfg.HealthCheck)
		err = ps.Ping(ctx)
		cancel()
		if err != nil && h.ctx.Err() == nil {
			h.st.recvErrors.Add(1)
			st.broken = true
		}
	case timeout(err):
		h.st.stalls.Add(1)
		st.broken, st.pinged = true, false
		s.replace(h, ps)
	default:
		h.st.recvErrors.Add(1)
		st.broken = true
		st.pause = min(max(2*st.pause, pauseMin), pauseMax)
		t := time.NewTimer(st.pause)
		select {
		case <-t.C:
		case <-h.ctx.Done():
			t.Stop()
		}
	}
}

// refused holds the node's subscriptions back after it refused err; the
// other refusals of the commands already sent fall in the same hold-off.
func (s *sub) refused(h *Hub, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if strings.Contains(err.Error(), "'ping'") {
		s.noPing = true // subscriptions may still work: keep them
		return
	}
	if !s.held.IsZero() {
		return
	}
	s.hold = min(max(2*s.hold, holdMin), holdMax)
	s.held = time.Now().Add(s.hold)
	signal(s.dirty)
}

// checked reports whether a silent connection is to be checked with a
// PING: something may be subscribed on it and the node answers PING.
func (s *sub) checked(h *Hub) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return s.held.IsZero() && !s.noPing
}

func (s *sub) current(h *Hub) transport.Subscription {
	h.mu.Lock()
	defer h.mu.Unlock()
	return s.ps
}

// replace puts a new PubSub in the place of old, which stalled, and has
// sync subscribe it to every waited-for key.
func (s *sub) replace(h *Hub, old transport.Subscription) {
	h.mu.Lock()
	if h.closed || s.ps != old {
		h.mu.Unlock()
		return
	}
	s.ps = s.subscribe(h) // no channels: nothing is sent yet
	s.resync = true
	signal(s.dirty)
	h.mu.Unlock()
	_ = old.Close()
}

// notify dispatches a release notification to its key's head, as from
// the first node (tests).
func (h *Hub) notify(m transport.Event) { h.notifyFrom(0, m) }

// notifyFrom dispatches a release notification that node sub idx sent to
// its key's head and Watches. A notification with a payload (the released
// owner value) wakes them once Config.Quorum nodes have sent it: the release script runs on each
// node in turn, and a waiter woken by the first would find the key still
// held on the others.
func (h *Hub) notifyFrom(idx int, m transport.Event) {
	h.st.messages.Add(1)
	key, ok := strings.CutPrefix(m.Channel, Prefix)
	if !ok {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	if wk := h.watched[key]; wk != nil && wk.heard(idx, m.Payload, h.quorum) {
		for _, w := range wk.ws {
			signal(w.wake)
		}
	}
	q := h.keys[key]
	if q == nil {
		return
	}
	if m.Payload != "" && m.Payload != q.last && h.quorum > 1 {
		if m.Payload != q.counting {
			q.counting, q.seen = m.Payload, 0
		}
		q.seen |= 1 << (idx % 64)
		if bits.OnesCount64(q.seen) < h.quorum {
			return
		}
	}
	h.wake(q, wokenNotify, m.Payload)
}

// sync applies the changes of the waited-for keys to the node until
// Close. have is what the current PubSub was asked to subscribe.
func (s *sub) sync(h *Hub) {
	defer h.wg.Done()
	have := make(map[string]bool)
	retry := time.NewTimer(holdMax)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-s.dirty:
		case <-retry.C:
		}
		h.mu.Lock()
		if h.closed {
			h.mu.Unlock()
			return
		}
		wait, old := s.holdOff(h)
		if wait > 0 {
			h.mu.Unlock()
			retry.Reset(wait)
			continue
		}
		ps := s.ps
		var add, drop []string
		if s.resync {
			s.resync = false
			clear(have)
			for k := range h.keys {
				have[k] = true
				add = append(add, Channel(k))
			}
			for k := range h.watched {
				if !have[k] {
					have[k] = true
					add = append(add, Channel(k))
				}
			}
		} else {
			for k, on := range s.changes {
				if on && !have[k] {
					have[k] = true
					add = append(add, Channel(k))
				} else if !on && have[k] {
					delete(have, k)
					drop = append(drop, Channel(k))
				}
			}
		}
		clear(s.changes)
		h.mu.Unlock()
		if old != nil {
			_ = old.Close()
		}
		s.send(h, ps.Subscribe, add)
		s.send(h, ps.Unsubscribe, drop)
	}
}

// holdOff returns how long the node's subscriptions are still held back
// after a refusal. When the hold-off has just ended, it puts a new PubSub
// in the place of the current one, which it returns for the caller to
// close, and has every waited-for key subscribed. h.mu is held.
func (s *sub) holdOff(h *Hub) (time.Duration, transport.Subscription) {
	if s.held.IsZero() {
		return 0, nil
	}
	if wait := time.Until(s.held); wait > 0 {
		clear(s.changes) // the resync sends them all
		return wait, nil
	}
	s.held = time.Time{}
	old := s.ps
	s.ps = s.subscribe(h) // no channels: nothing is sent yet
	s.resync = true
	return 0, old
}

// send makes one SUBSCRIBE or UNSUBSCRIBE call within SubscribeTimeout.
func (s *sub) send(h *Hub, call func(context.Context, ...string) error, channels []string) {
	if len(channels) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(h.ctx, h.cfg.SubscribeTimeout)
	defer cancel()
	if err := call(ctx, channels...); err != nil && h.ctx.Err() == nil {
		h.st.subErrors.Add(1)
	}
}

// timeout reports a deadline or socket timeout.
func timeout(err error) bool { return transport.IsTimeout(err) }

// subscribe returns a new subscription of the node's: nothing is sent
// yet. A transport that cannot subscribe gets one whose reads fail.
func (s *sub) subscribe(h *Hub) transport.Subscription {
	ps, err := s.conn.Subscribe(h.ctx)
	if err != nil {
		return failedSub{err}
	}
	return ps
}

// failedSub is the subscription of a node whose transport could not make
// one: every call fails with its error (a read after a pause, see failed).
type failedSub struct{ err error }

func (f failedSub) Subscribe(context.Context, ...string) error   { return f.err }
func (f failedSub) Unsubscribe(context.Context, ...string) error { return f.err }
func (f failedSub) Ping(context.Context) error                   { return f.err }
func (f failedSub) Close() error                                 { return nil }
func (f failedSub) Receive(context.Context, time.Duration) (transport.Event, error) {
	return transport.Event{}, f.err
}
