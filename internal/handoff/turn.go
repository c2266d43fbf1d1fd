package handoff

import (
	"context"
	"errors"
	"time"
)

// reason says what woke a key's head.
type reason uint8

const (
	none        reason = iota
	wokenNotify        // a node's release notification
	wokenLocal         // Released by this process
	wokenLeave         // the previous head left: this one is now head
	wokenGift          // Offer handed the head a value (the lock itself)
	wokenShared        // a shared waiter got in: the shared run behind it may try
)

// queue is the local FIFO of the waiters for one key. Guarded by Hub.mu.
type queue struct {
	key        string
	head, tail *Turn
	pending    reason // a wake-up not yet consumed by the head's Wait
	held       bool   // made head by LeaveHolding: this process holds the lock until a wake-up or Unheld
	holds      uint64 // times held was set: an announcement's deadline ends only the hold it was set for
	last       string // payload of the last wake-up, to drop duplicates
	counting   string // payload whose notifications are being counted toward the quorum
	seen       uint64 // nodes (sub index) that sent it
	sharing    bool   // a shared waiter got in and every waiter is shared: a new one is admitted at once
}

func (q *queue) push(t *Turn) {
	t.prev = q.tail
	if q.tail != nil {
		q.tail.next = t
	} else {
		q.head = t
	}
	q.tail = t
}

// pushAhead puts t behind the last waiter that is not shared, or first.
func (q *queue) pushAhead(t *Turn) {
	at := q.tail
	for at != nil && at.shared {
		at = at.prev
	}
	if at == q.tail {
		q.push(t)
		return
	}
	t.prev = at
	if at != nil {
		t.next = at.next
		at.next = t
	} else {
		t.next = q.head
		q.head = t
	}
	t.next.prev = t
}

func (q *queue) remove(t *Turn) {
	if t.prev != nil {
		t.prev.next = t.next
	} else {
		q.head = t.next
	}
	if t.next != nil {
		t.next.prev = t.prev
	} else {
		q.tail = t.prev
	}
	t.prev, t.next = nil, nil
}

// Turn is one waiter's place in its key's local queue, from Hub.EnterWant to
// Leave. Wait must not be called by two goroutines at once; Leave may be
// called from any goroutine, also while Wait runs.
type Turn struct {
	h          *Hub
	q          *queue // nil if entered after Close
	prev, next *Turn  // in q; guarded by Hub.mu
	left       bool   // guarded by Hub.mu
	waiting    bool   // blocked in Wait (for its turn or a wake-up); guarded by Hub.mu
	want       any    // what the waiter asks for (EnterWant), for Offer's fits
	shared     bool   // entered by EnterShared
	admitted   bool   // let try beside the head (admit), not yet seen by Wait; guarded by Hub.mu
	trying     bool   // Wait returned for a try, and Wait or Leave did not follow yet; guarded by Hub.mu
	gift       *gift  // handed by Offer, not yet taken; guarded by Hub.mu
	wake       chan struct{}
}

// gift is a value handed to a head by Offer, with what to do with it if
// the head leaves without taking it.
type gift struct {
	v      any
	fits   func(want any) bool
	reject func(v any)
}

// Take returns the value that Offer handed this waiter, once; nil if none.
// Call it after every Wait: a Wait that returns because of an Offer says
// woken.
func (t *Turn) Take() any {
	t.h.mu.Lock()
	defer t.h.mu.Unlock()
	if t.gift == nil {
		return nil
	}
	v := t.gift.v
	t.gift = nil
	t.h.st.handed.Add(1)
	return v
}

// Wait blocks while the Turn is not the head of its key's local queue
// (with no limit but ctx), unless it was admitted beside the head (see
// EnterShared): then it returns at once, woken, once per admission. Once
// head, it returns at once if a wake-up is pending (a notification or
// ReleasedOwner that came while the head was not waiting, or its promotion to
// head), and otherwise blocks until a release notification for the key
// arrives, ReleasedOwner is called for it, d has elapsed since it became head in
// this call, or ctx is done. With d <= 0 it does not wait for a
// notification: it returns once head (consuming a pending wake-up if there
// is one). A head made head by LeaveHolding (this process holds the lock:
// trying would only find it) waits, whatever d, for a wake-up or
// Hub.Unheld, and from Unheld on as any head does.
//
// woken is true when a wake-up (a node's notification, ReleasedOwner, the
// promotion to head after the previous head left, or an admission) ended
// the wait, false when d did. The error is ctx's, ErrClosed after Close,
// or ErrLeft after Leave; the Turn stays in the queue on ctx's error (call
// Leave). A wake-up that came as ctx ended stays pending for the next Wait
// or head. Calling Wait again after a return says the try failed: the
// queue stops admitting new shared waiters at once.
func (t *Turn) Wait(ctx context.Context, d time.Duration) (woken bool, err error) {
	if ctx == nil {
		return false, errors.New("redlock: handoff: nil context")
	}
	h := t.h
	var timer *time.Timer
	var expired <-chan time.Time
	fired := false
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	h.mu.Lock()
	if t.trying && t.q != nil {
		t.q.sharing = false // its try failed: the lock is not open to shared waiters now
	}
	t.trying = false
	for {
		if err := t.stopped(ctx); err != nil {
			h.mu.Unlock()
			return false, err
		}
		woken, wait := t.ready(d, fired)
		if !wait {
			t.trying = true
			h.mu.Unlock()
			if fired && !woken {
				h.st.timer.Add(1)
			}
			return woken, nil
		}
		if t.q.head == t && !t.q.held && timer == nil && d > 0 {
			timer = time.NewTimer(d)
			expired = timer.C
		}
		t.waiting = true
		h.mu.Unlock()
		select {
		case <-t.wake:
		case <-expired:
			fired = true
		case <-ctx.Done():
		case <-h.ctx.Done():
		}
		h.mu.Lock()
		t.waiting = false
	}
}

// ready reports whether Wait returns now, and if so whether a wake-up
// ended it (consumed here), given its d and whether its timer fired.
// h.mu is held.
func (t *Turn) ready(d time.Duration, fired bool) (woken, wait bool) {
	q := t.q
	if q.head != t {
		if t.admitted {
			t.admitted = false
			t.h.st.woken(wokenShared)
			return true, false
		}
		return false, true
	}
	r := q.pending
	if r == none && t.admitted {
		r = wokenShared
	}
	t.admitted = false
	if r != none {
		q.pending, q.held = none, false
		t.h.st.woken(r)
		return true, false
	}
	if !q.held && (d <= 0 || fired) {
		return false, false
	}
	return false, true
}

// Pause blocks for d, or until a wake-up (consumed as by Wait: an Offer,
// whose value Take then returns, a release notification, ReleasedOwner), ctx
// is done, the Hub is closed or the Turn leaves: a head that gives way to
// other processes before its attempt, but takes a lock passed on
// meanwhile, and tries at once once the key was released again. Unlike
// Wait, d elapsing is not counted in Stats.Timer. The error is as Wait's.
func (t *Turn) Pause(ctx context.Context, d time.Duration) error {
	if ctx == nil {
		return errors.New("redlock: handoff: nil context")
	}
	h := t.h
	timer := time.NewTimer(max(d, 0))
	defer timer.Stop()
	for {
		h.mu.Lock()
		err := t.stopped(ctx)
		r := none
		if err == nil && t.q.head == t {
			r = t.q.pending
		}
		if r != none {
			t.q.pending, t.q.held = none, false
		}
		h.mu.Unlock()
		if r != none {
			h.st.woken(r)
		}
		if err != nil || r != none {
			return err
		}
		select {
		case <-t.wake:
		case <-timer.C:
			return nil
		case <-ctx.Done():
		case <-h.ctx.Done():
		}
	}
}

// stopped returns why Wait must return now, if it must. h.mu is held.
func (t *Turn) stopped(ctx context.Context) error {
	switch {
	case t.h.closed || t.q == nil:
		return ErrClosed
	case t.left:
		return ErrLeft
	}
	return ctx.Err()
}

// Leave takes the Turn out of its queue: the caller gave up (or acquired
// the lock: see LeaveHolding). If it was the head, the next waiter becomes
// head and is woken to try at once; if it was the last, the key's channel
// is unsubscribed on the nodes (in the background). A Wait in progress on
// the Turn returns ErrLeft. Leave is idempotent and never blocks on the
// network.
func (t *Turn) Leave() { t.leave(leaveWake) }

// LeaveHolding is Leave for a waiter that leaves with the lock: the next
// waiter becomes head but is not woken, since trying now would only find
// the lock held by this process; it waits for this process's release
// (ReleasedOwner, Offer), a node's notification, or Hub.Unheld, after which
// its own timer runs.
func (t *Turn) LeaveHolding() { t.leave(leaveHolding) }

// LeaveShared is Leave for a waiter entered by EnterShared that leaves
// with a shared hold of the lock: others may hold it beside it, so the
// shared waiters at the front of the queue, up to the first waiter that is
// not shared, are all admitted to try at once (the head is woken, the
// others' Wait returns, woken), and while no other waiter is queued, a
// shared waiter that enters is admitted too, until one of their tries
// fails (Wait is called again). A waiter that is not shared stays where
// it is, and stops the shared ones behind it. For a Turn entered
// otherwise, LeaveShared is Leave.
func (t *Turn) LeaveShared() { t.leave(leaveShared) }

// How a Turn leaves its queue.
const (
	leaveWake    = iota // Leave: the next head is woken
	leaveHolding        // LeaveHolding: the next head waits for the release
	leaveShared         // LeaveShared: the shared run at the front is admitted
)

func (t *Turn) leave(how int) {
	h := t.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if t.left || t.q == nil {
		t.left = true
		return
	}
	t.left = true
	q := t.q
	wasHead := q.head == t
	q.remove(t)
	h.st.waiting.Add(-1)
	signal(t.wake)
	g := t.gift
	t.gift, t.admitted, t.trying = nil, false, false
	shared := how == leaveShared && t.shared
	if q.head == nil {
		delete(h.keys, q.key)
		if h.watched[q.key] == nil {
			h.want(q.key, false)
		}
	} else if wasHead {
		q.held = how == leaveHolding
		if q.held {
			q.holds++
			q.pending = none // from before this process got the lock: trying would only find it
		} else if q.pending == none {
			q.pending = wokenLeave
		}
		// Even unwoken, the new head's Wait must see it is head: its timer
		// runs from now, the fallback when no release is announced.
		signal(q.head.wake)
	}
	if shared && q.head != nil {
		q.admit()
	} else if wasHead {
		q.sharing = false
	}
	if g != nil && !h.give(q, g) {
		h.mu.Unlock()
		defer h.mu.Lock() // for the deferred Unlock
		g.reject(g.v)
	}
}

// admit lets the shared waiters at the front of q try now: a waiting head
// is woken, and each other one not trying yet is admitted. It stops at the
// first waiter that is not shared; if there is none, q admits the shared
// waiters that enter. Hub.mu is held.
func (q *queue) admit() {
	t := q.head
	for ; t != nil && t.shared; t = t.next {
		switch {
		case t.trying || t.admitted:
		case t == q.head:
			q.held = false
			if q.pending == none {
				q.pending = wokenShared
			}
			signal(t.wake)
		default:
			t.admitted = true
			signal(t.wake)
		}
	}
	q.sharing = t == nil
}
