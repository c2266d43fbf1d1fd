package handoff

import (
	"context"
	"errors"
	"math/bits"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Waits of a node's reader between failed reads (the node is down: each
// read dials again): doubling from pauseMin up to pauseMax.
const (
	pauseMin = 50 * time.Millisecond
	pauseMax = time.Second
)

// sub is one node's pub/sub connection, run by two goroutines: read
// receives the notifications and dispatches them; sync sends SUBSCRIBE
// and UNSUBSCRIBE as the set of waited-for keys changes, so that neither
// a dead node nor a slow SUBSCRIBE ever holds up Enter, Wait or Leave.
//
// go-redis's PubSub reconnects on its own after a failed read or write,
// and then subscribes the new connection to every channel it was asked
// for (also those whose SUBSCRIBE failed; UNSUBSCRIBE forgets a channel
// even if it failed). A connection that stays open but silent (a frozen
// node, a partition that drops packets) gives no error: read detects it
// with a PING and replaces the PubSub, and sync subscribes the new one to
// every key.
type sub struct {
	idx    int // among the Hub's subs
	client *redis.Client
	dirty  chan struct{} // capacity 1: changes or resync to apply

	// guarded by Hub.mu
	ps      *redis.PubSub
	changes map[string]bool // since the last sync: key -> subscribe (true) or unsubscribe
	resync  bool            // ps is new: subscribe every waited-for key
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
		msg, err := ps.ReceiveTimeout(ctx, h.cfg.HealthCheck)
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
		if m, ok := msg.(*redis.Message); ok {
			h.notifyFrom(s.idx, m)
		}
	}
}

// failed handles a failed read of ps.
func (s *sub) failed(h *Hub, ps *redis.PubSub, err error, st *readState) {
	var refused redis.Error
	switch {
	case errors.As(err, &refused):
		// The node refused a command sent on the connection (SUBSCRIBE
		// without the channel permission): the connection itself is fine.
		h.st.subErrors.Add(1)
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
	case errors.Is(err, redis.ErrClosed) && s.current(h) != ps:
		// replaced meanwhile: read the new one
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

func (s *sub) current(h *Hub) *redis.PubSub {
	h.mu.Lock()
	defer h.mu.Unlock()
	return s.ps
}

// replace puts a new PubSub in the place of old, which stalled, and has
// sync subscribe it to every waited-for key.
func (s *sub) replace(h *Hub, old *redis.PubSub) {
	h.mu.Lock()
	if h.closed || s.ps != old {
		h.mu.Unlock()
		return
	}
	s.ps = s.client.Subscribe(h.ctx) // no channels: nothing is sent yet
	s.resync = true
	signal(s.dirty)
	h.mu.Unlock()
	_ = old.Close()
}

// notify dispatches a release notification to its key's head, as from
// the first node (tests).
func (h *Hub) notify(m *redis.Message) { h.notifyFrom(0, m) }

// notifyFrom dispatches a release notification that node sub idx sent. A
// notification with a payload (the released owner value) wakes the head
// once Config.Quorum nodes have sent it: the release script runs on each
// node in turn, and a waiter woken by the first would find the key still
// held on the others.
func (h *Hub) notifyFrom(idx int, m *redis.Message) {
	h.st.messages.Add(1)
	key, ok := strings.CutPrefix(m.Channel, Prefix)
	if !ok {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.keys[key]
	if q == nil || h.closed {
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
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-s.dirty:
		}
		h.mu.Lock()
		ps := s.ps
		var add, drop []string
		if s.resync {
			s.resync = false
			clear(have)
			for k := range h.keys {
				have[k] = true
				add = append(add, Channel(k))
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
		s.send(h, ps.Subscribe, add)
		s.send(h, ps.Unsubscribe, drop)
	}
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
func timeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
