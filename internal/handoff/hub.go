// Package handoff lets the waiters of a lock wait for its release instead
// of polling for it.
//
// A node's release script announces each key it deleted with a PUBLISH on
// Channel(key). A Hub (one per lock Client) keeps one pub/sub connection
// per node, subscribed to the channels of the keys its local waiters wait
// for, and a first-in first-out queue of local waiters per key (a waiter
// for several keys at once uses a Watch instead): only the head of a
// key's queue contends on the nodes; it waits between its tries
// until a release notification arrives (from any node, or from this
// process through ReleasedOwner) or its backoff elapses, whichever comes first.
// When the head leaves (it acquired the lock or gave up), the next waiter
// becomes head and tries at once. Shared waiters (EnterShared: readers)
// are the exception: once one leaves with the lock (LeaveShared), the
// shared waiters queued at the front behind it all try at once, up to the
// first waiter that is not shared, which keeps its place.
//
// Notifications only shorten waits: every wait also ends after the duration
// the caller gives (its backoff), so a lost notification (a node down,
// restarted or partitioned, a subscription not yet in place, a cluster
// node) costs at most that wait, never a waiter stuck forever.
//
// A waiter's loop, with a non-head first waiting to become head:
//
//	t := hub.EnterWant(key, nil)
//	defer t.Leave()
//	for d := time.Duration(0); ; d = backoff() {
//		if _, err := t.Wait(ctx, d); err != nil {
//			return err
//		}
//		if tryLock() {
//			return nil
//		}
//	}
package handoff

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/goredisconn"
	"github.com/redlock-go/redlock/transport"
)

// Prefix begins the channel of every key: see Channel.
const Prefix = "redlock:released:"

// Channel returns the pub/sub channel on which a node announces that it
// released key: Prefix followed by the key. The release script must
// PUBLISH there after deleting the key; a Hub subscribes to it while a
// local waiter waits for the key. With Redis ACLs, the users of both need
// the channel permission &redlock:released:* (and +publish, +subscribe,
// +unsubscribe, +ping).
func Channel(key string) string { return Prefix + key }

// Defaults of Config.
const (
	DefaultSubscribeTimeout = time.Second
	DefaultHealthCheck      = 5 * time.Second
)

// announceWait bounds how long a head waits for the announcement of a
// release that Unheld reported: a node whose subscription to the key was
// being renewed (the queue emptied and formed again) misses it, and a
// head that waited for it alone would wait until the next release of this
// library, which may never come (a holder of another library publishes
// nothing).
const announceWait = 100 * time.Millisecond

// Config tunes a Hub. The zero value uses the defaults.
type Config struct {
	// SubscribeTimeout bounds each SUBSCRIBE and UNSUBSCRIBE call sent to
	// a node (default 1 s). They run in the background, never in EnterWant,
	// Wait or Leave; a failed one means that node's notifications for the
	// key are missing, and its waiters wait out their timer.
	SubscribeTimeout time.Duration
	// HealthCheck is how long a node's pub/sub connection may stay silent
	// before it is sent a PING (default 5 s); if nothing at all arrives
	// for another HealthCheck, the connection counts as stalled (a frozen
	// node, a partition that drops packets) and is replaced by a new one.
	HealthCheck time.Duration
	// Quorum is how many nodes must announce one release (notifications
	// with the same payload) before it wakes the waiters (default 1). Set
	// it to the lock's quorum: the release deletes the key node after
	// node, and a waiter woken by the first would find it still held on
	// others. It is capped at the number of nodes that can announce.
	Quorum int
}

// ErrClosed is the error of Wait once the Hub is closed.
var ErrClosed = errors.New("redlock: handoff: hub closed")

// ErrLeft is the error of Wait on a Turn that has left its queue.
var ErrLeft = errors.New("redlock: handoff: turn already left")

// Hub is the waiting side of the locks of one Client: per-key local queues
// of waiters and at most one pub/sub connection per node. Its methods are
// safe for concurrent use.
type Hub struct {
	cfg    Config
	ctx    context.Context // cancelled by Close: ends waits, dials and the goroutines
	stop   context.CancelFunc
	subs   []*sub // nodes with a plain (non-cluster) client
	quorum int    // Config.Quorum, capped at len(subs)
	wg     sync.WaitGroup
	st     counters
	asked  atomic.Uint64 // Others calls: which node the next one asks

	mu      sync.Mutex
	keys    map[string]*queue    // keys with at least one local waiter
	watched map[string]*watchKey // keys with at least one Watch
	started bool                 // the nodes' goroutines run
	closed  bool
}

// New returns a Hub over the nodes' clients, one per independent master,
// as given to the lock Client. Nothing is sent before the first EnterWant;
// then each *redis.Client (standalone or sentinel failover) gets one
// pub/sub connection, kept until Close. Other clients get none and their
// waiters rely on the timer alone: a *redis.ClusterClient would need a
// sharded subscription (SSUBSCRIBE) per hash slot, on the node that owns
// it, followed through resharding, which this package does not do; a Ring
// or an unknown type has no single node to subscribe on. With no clients
// at all, the Hub still hands off between local waiters (ReleasedOwner, Leave).
//
// The clients stay the caller's: Close does not close them, and they must
// stay open until Close has returned. New returns an error for a nil
// client or a negative duration in cfg.
func New(clients []redis.UniversalClient, cfg Config) (*Hub, error) {
	h, err := newHub(cfg)
	if err != nil {
		return nil, err
	}
	for i, cl := range clients {
		c, plain := cl.(*redis.Client)
		if cl == nil || (plain && c == nil) {
			return nil, fmt.Errorf("redlock: handoff: node %d: nil client", i)
		}
		if plain {
			h.subs = append(h.subs, &sub{idx: len(h.subs), conn: goredisconn.New(c), dirty: make(chan struct{}, 1)})
		}
	}
	return h.start(cfg), nil
}

// NewConns is New over transports: every conn is one node to subscribe
// on (the caller leaves out those that cannot). New returns an error for
// a nil conn or a negative duration in cfg.
func NewConns(conns []transport.Conn, cfg Config) (*Hub, error) {
	h, err := newHub(cfg)
	if err != nil {
		return nil, err
	}
	for i, c := range conns {
		if c == nil {
			return nil, fmt.Errorf("redlock: handoff: node %d: nil transport", i)
		}
		h.subs = append(h.subs, &sub{idx: len(h.subs), conn: c, dirty: make(chan struct{}, 1)})
	}
	return h.start(cfg), nil
}

// newHub checks cfg and makes a Hub without nodes.
func newHub(cfg Config) (*Hub, error) {
	if cfg.SubscribeTimeout < 0 || cfg.HealthCheck < 0 || cfg.Quorum < 0 {
		return nil, fmt.Errorf("redlock: handoff: negative duration in %+v", cfg)
	}
	if cfg.SubscribeTimeout == 0 {
		cfg.SubscribeTimeout = DefaultSubscribeTimeout
	}
	if cfg.HealthCheck == 0 {
		cfg.HealthCheck = DefaultHealthCheck
	}
	return &Hub{cfg: cfg, keys: make(map[string]*queue)}, nil
}

// start sets the quorum over h's nodes and its context.
func (h *Hub) start(cfg Config) *Hub {
	h.quorum = min(max(cfg.Quorum, 1), max(len(h.subs), 1))
	h.ctx, h.stop = context.WithCancel(context.Background())
	return h
}

// EnterWant puts a waiter for key that asks for want (nil: anything) at
// the tail of the key's local queue and returns its Turn: Offer hands a
// value only to a head whose want it fits. The first waiter of a key makes
// the Hub subscribe to the key's channel on every node, in the background
// (the nodes' connections are opened on the first EnterWant of the Hub).
// EnterWant never blocks on the network. After Close, the Turn's Wait
// returns ErrClosed. The caller must call Leave when done.
func (h *Hub) EnterWant(key string, want any) *Turn { return h.enter(key, want, false, false) }

// EnterShared is EnterWant for a waiter of a lock that others may hold
// beside it (a reader): once a shared waiter leaves with it (LeaveShared),
// the shared waiters at the front of the queue try together instead of one
// after the other. A waiter entered by EnterWant keeps its place
// and stops the shared waiters behind it: they wait until it has left.
func (h *Hub) EnterShared(key string, want any) *Turn { return h.enter(key, want, true, false) }

// EnterAhead is EnterWant for a waiter whose failed try already keeps the
// shared waiters out on the nodes (a refused writer's intent): it enters
// behind the last waiter that is not shared, ahead of the shared waiters
// queued after it, which could only wait for it, and becomes head if
// there is none.
func (h *Hub) EnterAhead(key string, want any) *Turn { return h.enter(key, want, false, true) }

func (h *Hub) enter(key string, want any, shared, ahead bool) *Turn {
	t := &Turn{h: h, want: want, shared: shared, wake: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return t
	}
	q := h.keys[key]
	if q == nil {
		q = &queue{key: key}
		h.keys[key] = q
		if h.watched[key] == nil {
			h.want(key, true)
		}
	}
	t.q = q
	if ahead {
		q.pushAhead(t)
	} else {
		q.push(t)
	}
	h.st.waiting.Add(1)
	if !shared {
		q.sharing = false
	} else if q.sharing && q.head != t {
		t.admitted = true
	}
	return t
}

// ReleasedOwner tells the Hub that this process has just released key,
// stored under the owner value owner: the head of the key's local queue,
// if any, is woken at once (or, while it is not waiting, its next Wait
// returns at once). Use it in every release by this process; the nodes'
// notifications of the same release arrive later, after a round trip.
// When the release script publishes owner as the payload, the nodes'
// notifications of this same release do not wake the key's head again
// (see Stats.Duplicates); an empty owner leaves them to wake it.
// A shared head (EnterShared) is woken with the shared waiters queued
// behind it, up to the first that is not shared: this process held the
// lock, so they try together (see Turn.LeaveShared).
func (h *Hub) ReleasedOwner(key, owner string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if q := h.keys[key]; q != nil && !h.closed && h.wake(q, wokenLocal, owner) && q.head.shared {
		q.admit()
	}
}

// Unheld tells key's local queue that this process no longer holds the
// lock and did not hand it on: a head made head by LeaveHolding then waits
// with its own timer like any head, for a node's notification or its
// backoff, whichever comes first. released says the lock was deleted on
// the nodes, which announce it: while enough nodes' subscriptions stand
// (none held back after a refusal) to make the Hub's quorum, the head
// waits for that notification alone, as it did while the lock was held
// here, but for at most announceWait. A lock that ended without a release
// (lost, expired) is announced by nobody. It never blocks on the network.
func (h *Hub) Unheld(key string, released bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.keys[key]
	if q == nil || !q.held {
		return
	}
	if released && h.announcing() {
		holds := q.holds
		time.AfterFunc(announceWait, func() { h.unheldBy(q, holds) })
		return
	}
	q.held = false
	if q.head != nil {
		signal(q.head.wake)
	}
}

// unheldBy ends hold number holds of q if it still stands: the release's
// announcement did not wake q's head within announceWait.
func (h *Hub) unheldBy(q *queue, holds uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.keys[q.key] != q || !q.held || q.holds != holds {
		return
	}
	q.held = false
	if q.head != nil {
		signal(q.head.wake)
	}
}

// announcing reports whether enough nodes' subscriptions stand to make a
// release's notification wake a waiter (see Config.Quorum). h.mu is held.
func (h *Hub) announcing() bool {
	n := 0
	for _, s := range h.subs {
		if s.held.IsZero() {
			n++
		}
	}
	return n > 0 && n >= h.quorum
}

// Holds reports whether this process holds key's lock as its local
// queue knows it: a head that took it (Turn.LeaveHolding) and has not
// seen it released or unheld since.
func (h *Hub) Holds(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.keys[key]
	return q != nil && q.held
}

// Queued reports whether key has local waiters now.
func (h *Hub) Queued(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.keys[key] != nil
}

// Offer hands v (a held lock, passed on inside this process) to the head
// of key's local queue, if there is one, it holds no other offer, and
// fits(its want) is true: the head's Wait returns at once (woken) and its
// Take returns v. If that waiter leaves without taking v, v goes to the
// next head if it fits, else to reject (called without the Hub's lock, on
// the goroutine that called Leave or Close; it must not block). Offer
// reports whether v was handed; if not, the caller keeps v. It never
// blocks on the network.
func (h *Hub) Offer(key string, v any, fits func(want any) bool, reject func(v any)) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.keys[key]
	if h.closed || q == nil {
		return false
	}
	return h.give(q, &gift{v: v, fits: fits, reject: reject})
}

// give hands g to q's head if it fits. h.mu is held.
func (h *Hub) give(q *queue, g *gift) bool {
	head := q.head
	if h.closed || head == nil || head.gift != nil || !g.fits(head.want) {
		return false
	}
	head.gift = g
	q.pending = wokenGift
	signal(head.wake)
	return true
}

// Close stops the Hub: every Wait returns ErrClosed, the nodes' pub/sub
// connections are closed and Close returns once the Hub's goroutines have
// ended (a dial in progress ends with it; only a node that accepted the
// connection but does not answer can hold it, at most the client's
// ReadTimeout or twice the HealthCheck). Safe to call more than once.
func (h *Hub) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	h.stop()
	var open []transport.Subscription
	for _, s := range h.subs {
		if s.ps != nil {
			open = append(open, s.ps)
		}
	}
	h.mu.Unlock()
	for _, ps := range open {
		_ = ps.Close()
	}
	h.wg.Wait()
}

// want records, for every node, that key's channel is to be subscribed
// (on) or unsubscribed, and starts the nodes' goroutines on first use.
// h.mu is held.
func (h *Hub) want(key string, on bool) {
	if h.closed || len(h.subs) == 0 {
		return
	}
	if !h.started {
		h.started = true
		for _, s := range h.subs {
			s.ps = s.subscribe(h) // no channels: nothing is sent yet
			s.changes = make(map[string]bool)
			h.wg.Add(2)
			go s.read(h)
			go s.sync(h)
		}
	}
	for _, s := range h.subs {
		s.changes[key] = on
		signal(s.dirty)
	}
}

// wake delivers a wake-up of reason r to q's head: recorded as pending
// (consumed by the head's Wait, at once if it is waiting). A non-empty
// payload equal to the last one the key was woken with is a duplicate (the
// same release, seen on another node) and is dropped: wake reports whether
// it was delivered. h.mu is held.
func (h *Hub) wake(q *queue, r reason, payload string) bool {
	if payload != "" {
		if payload == q.last {
			h.st.duplicates.Add(1)
			return false
		}
		q.last = payload
	}
	if q.pending == none {
		q.pending = r
	}
	signal(q.head.wake)
	return true
}

// signal makes a non-blocking send on a channel of capacity 1.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
