package redlock

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/clock"
	"github.com/redlock-go/redlock/internal/lockstate"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/observe"
)

// Lock is an acquired lock. Its methods are safe for concurrent use. A
// nil *Lock (the handle of a failed TryLock whose error was ignored) is
// safe to use: its accessors return zero values, Release and Extend an
// error matching ErrNotHeld.
//
// A Lock ends once: released (Release), handed to a waiter of this Client
// (a new Lock then holds it), or lost (its validity ran out, an
// extension found that a quorum no longer holds it, or the package caught
// a bug of its own in the Lock's phases: ErrInternal). Ending records the
// cause, cancels Context (and Run's fn ctx), then closes Done, and stops
// the Lock's timers.
//
// Extensions (Extend, watchdog renewals) run one at a time per Lock, in
// call order, and their calls to each node go out in order. While one is
// in flight, Deadline is already the earlier of the current deadline and
// the one it would set, and it moves later only when the extension reached
// the quorum: the deadline is never later than what the last PEXPIRE left
// on a quorum. Release waits for the extension in flight; a lock is handed
// on only when its last round confirmed the quorum with validity to spare,
// otherwise it is deleted and the loss reported. Observers are called
// after the Lock and the Client are let go, so they may call anything on
// either.
type Lock struct {
	// (Fields are laid out so that a Lock fits the 512-byte size class:
	// small ones packed together, rare ones in more.)
	c        *Client
	keys     []string
	owner    string
	token    int64         // fencing token (WithFencing), else 0
	won      *answers      // what the nodes answered the winning attempt, for Release
	acquired time.Time     // start of the winning attempt
	maxHold  time.Duration // WithMaxHold for this lock; 0: no cap
	// runBefore is how long the run of passes had lasted when this Lock
	// was passed on to (0 for a Lock taken from the nodes): see runAge.
	runBefore time.Duration
	// ordr keeps the hold's extension calls in order per node (see ord);
	// shared with successors. Made by the first extension: most locks are
	// never extended, and a held one then costs two allocations less.
	ordr    atomic.Pointer[order]
	typ     lockType // the lock's type (kinds.go)
	name    string   // the key the call asked for (a semaphore's name; else keys[0])
	hold    string   // the hold's name on the nodes: its first entry's owner value (reentrant entries share it)
	passes  int32    // times the hold was passed on inside this Client in a row (see handOn)
	renewAt int32    // the renewer's index of l (1 + position; 0: not renewed); guarded by renewer.mu
	// renewer renews a watchdog Lock in the background (see Watchdog): the
	// Client's; nil for a lock of fixed TTL.
	renewer *renewer

	mu       sync.Mutex
	life     life // phase and end (life.go)
	ttl      time.Duration
	deadline time.Time     // end of validity on the client's monotonic clock
	votes    []heldVote    // of the acquisition or last extension; a copy (see setVotes)
	votesA   [5]heldVote   // backing of votes up to 5 nodes
	done     chan struct{} // made on demand, closed when the Lock ends
	ctx      context.Context
	cancel   context.CancelCauseFunc
	expiry   func() bool   // stops the timer that ends the Lock at its deadline; nil if none
	expiryAt time.Time     // what that timer was set for
	retry    func() bool   // stops the timer of a retried watchdog renewal; nil if none
	idle     chan struct{} // made by Release while extending; closed when the extension settles
	more     *lockMore     // made on first use; guarded by mu
}

// lockMore is what few Locks use: bound contexts (Run) and extensions
// queued behind another.
type lockMore struct {
	bound []context.CancelCauseFunc // of the contexts bind made: cancelled as the Lock ends
	queue []*turn                   // extensions waiting for their turn, in call order
}

// heldVote is what a Lock keeps of a node's vote: a quorum.Vote without
// the value a fencing candidate carries (the Lock has its token), 32
// bytes instead of 40.
type heldVote struct {
	Err        error
	Latency    time.Duration
	OK         bool
	Done       bool
	Discounted bool
}

// moreLocked returns l.more, making it. l.mu must be held.
func (l *Lock) moreLocked() *lockMore {
	if l.more == nil {
		l.more = &lockMore{}
	}
	return l.more
}

// queued is the number of extensions queued (m may be nil). l.mu must
// be held.
func (m *lockMore) queued() int {
	if m == nil {
		return 0
	}
	return len(m.queue)
}

func (c *Client) newLock(r *request, keys []string, a *attempt, out quorum.Outcome) *Lock {
	l := &Lock{c: c, keys: keys, owner: a.owner, token: a.token, won: c.watch(a), acquired: a.start,
		maxHold: r.o.maxHold, ttl: r.ttl, deadline: a.start.Add(r.ttl - driftBudget(r.ttl, c.o.driftFactor)),
		typ: r.typ, name: r.keys[0], hold: r.hold}
	if l.hold == "" {
		l.hold = a.owner
	}
	l.setVotes(out.Votes)
	if r.watchdog {
		l.renewer = &c.renewer
		l.watch()
	}
	return l
}

// watch starts the expiry timer and the renewals of a new watchdog Lock.
func (l *Lock) watch() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armExpiry()
	l.renewer.add(l.c, l)
}

// ord returns the hold's order, making it on first use. Every extension
// calls it before its round starts, so that a successor made once that
// extension settled (successor) shares it with any call of it still in
// flight.
func (l *Lock) ord() *order {
	if o := l.ordr.Load(); o != nil {
		return o
	}
	l.ordr.CompareAndSwap(nil, newOrder(len(l.c.nodes)))
	return l.ordr.Load()
}

// setVotes keeps a copy of a round's votes: the round's own slice would
// keep the round, its commands and its contexts alive for as long as the
// Lock is held. l.mu must be held, or l not yet shared.
func (l *Lock) setVotes(v []quorum.Vote) {
	if len(v) <= len(l.votesA) {
		l.votes = l.votesA[:len(v)]
	} else {
		l.votes = make([]heldVote, len(v))
	}
	for i, x := range v {
		l.votes[i] = heldVote{Err: x.Err, Latency: x.Latency, OK: x.OK, Done: x.Done, Discounted: x.Discounted}
	}
}

// setHeldVotes is setVotes from another Lock's votes.
func (l *Lock) setHeldVotes(v []heldVote) {
	if len(v) <= len(l.votesA) {
		l.votes = append(l.votesA[:0], v...)
		return
	}
	l.votes = append([]heldVote(nil), v...)
}

// roundVotes returns l's votes as a round's (for results). l.mu must be
// held, or l not yet shared.
func (l *Lock) roundVotes() []quorum.Vote {
	v := make([]quorum.Vote, len(l.votes))
	for i, x := range l.votes {
		v[i] = quorum.Vote{Err: x.Err, Latency: x.Latency, OK: x.OK, Done: x.Done, Discounted: x.Discounted}
	}
	return v
}

// Key returns the (first) locked key.
func (l *Lock) Key() string {
	if l == nil {
		return ""
	}
	return l.keys[0]
}

// Keys returns the locked keys.
func (l *Lock) Keys() []string {
	if l == nil {
		return nil
	}
	return append([]string(nil), l.keys...)
}

// Owner returns the owner value stored on the nodes: the Client's ID, a
// colon and the attempt's 128 random bits (see admin.SplitOwner).
func (l *Lock) Owner() string {
	if l == nil {
		return ""
	}
	return l.owner
}

// Token returns the lock's fencing token (WithFencing), or 0 without
// fencing. Pass it, with Owner, with every write to the protected
// resource, which must refuse a write whose token is lower than one it has
// already seen, or equal to it from another owner (see package fence): a
// holder that was paused past its deadline then cannot overwrite what a
// later holder wrote.
func (l *Lock) Token() int64 {
	if l == nil {
		return 0
	}
	return l.token
}

// TTL returns the TTL of the last acquisition, extension or renewal.
func (l *Lock) TTL() time.Duration {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ttl
}

// Deadline returns the end of the lock's validity, on the Client's clock
// (monotonic with the real clock). Past it, the lock may be held by someone
// else.
func (l *Lock) Deadline() time.Time {
	if l == nil {
		return time.Time{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Remaining returns the validity left, or 0 once the deadline has passed or
// the lock was released or lost.
func (l *Lock) Remaining() time.Duration {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.remaining()
}

func (l *Lock) remaining() time.Duration {
	if l.c == nil || l.life.over() { // a zero Lock not made by a Client, or ended
		return 0
	}
	if d := l.deadline.Sub(l.c.o.clock.Now()); d > 0 {
		return d
	}
	return 0
}

// Votes returns what each node answered in the acquisition (or the last
// successful extension), in node order.
func (l *Lock) Votes() []observe.NodeResult {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.c.results(quorum.Outcome{Votes: l.roundVotes()})
}

// Done returns a channel that is closed when the Lock ends: at Release, or
// as soon as the process can no longer be sure it holds the lock (a
// renewal or Extend found that a quorum no longer holds our value, or the
// validity deadline arrived before a renewal succeeded). A timer set for
// the deadline on the Client's clock closes it then, not the next renewal.
// Err says why. A process paused past its deadline learns of the loss only
// when it runs again: that is what fencing tokens are for.
func (l *Lock) Done() <-chan struct{} {
	if l == nil {
		return closed
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		l.done = make(chan struct{})
		if l.life.over() {
			close(l.done)
		}
	}
	l.armExpiry()
	return l.done
}

// closed is the Done channel of a nil Lock.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Context returns a context that is cancelled when the Lock ends (see
// Done); context.Cause then returns Err's error. It does not end with the
// ctx the Lock was acquired with.
func (l *Lock) Context() context.Context {
	if l == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(ErrNotHeld)
		return ctx
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil {
		l.ctx, l.cancel = context.WithCancelCause(context.Background())
		if l.life.over() {
			l.cancel(l.life.cause)
		}
	}
	l.armExpiry()
	return l.ctx
}

// bind returns a child of parent that is also cancelled, with the Lock's
// cause, when the Lock ends: synchronously, before Done closes (Run's fn
// ctx). The CancelFunc must be called when the child is no longer used.
func (l *Lock) bind(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.life.over() {
		cancel(l.life.cause)
	} else {
		m := l.moreLocked()
		m.bound = append(m.bound, cancel)
	}
	return ctx, func() { cancel(context.Canceled) }
}

// Err returns nil while the lock is held and its deadline has not passed
// (checked on the clock, not left to the timer), ErrReleased after
// Release, and otherwise why it was lost: an error matching ErrLockLost,
// a *QuorumError with the per-node detail when a renewal or Extend found
// it gone.
func (l *Lock) Err() error {
	if l == nil || l.c == nil { // nil, or a zero Lock not made by a Client
		return ErrNotHeld
	}
	if l.lapsed() {
		l.end(l.expired())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.life.cause
}

// lapsed reports whether l has not ended but its deadline has passed.
func (l *Lock) lapsed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.life.over() && l.remaining() <= 0
}

// expired is the cause of a Lock whose deadline passed without a renewal.
func (l *Lock) expired() error {
	if mh := l.maxHold; l.renewer != nil && mh > 0 && l.c.o.clock.Now().Sub(l.acquired)+l.c.o.lease > mh {
		return fmt.Errorf("%w: %s: the validity ran out at the max hold of %v: %w", ErrLockLost, quoteKeys(l.keys), mh, ErrMaxHold)
	}
	return fmt.Errorf("%w: %s: the validity ran out before a renewal succeeded", ErrLockLost, quoteKeys(l.keys))
}

// armExpiry sets the timer that ends the Lock at its deadline, if it is
// not set, or sets it again if the deadline was pulled in before it. l.mu
// must be held.
func (l *Lock) armExpiry() {
	if l.life.over() || l.expiry != nil && !l.deadline.Before(l.expiryAt) {
		return
	}
	if l.expiry != nil {
		l.expiry()
	}
	l.expiryAt = l.deadline
	l.expiry = clock.AfterFunc(l.c.o.clock, l.deadline.Sub(l.c.o.clock.Now()), l.onExpiry)
}

// onExpiry runs at the deadline the timer was set for; an extension may
// have moved the deadline since, then it sets the timer again.
func (l *Lock) onExpiry() {
	if l.expiryDue() {
		l.end(l.expired())
	}
}

// expiryDue clears the timer that fired and reports whether l is to end
// now; if its deadline moved later, it sets the timer again.
func (l *Lock) expiryDue() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expiry = nil
	if l.life.over() {
		return false
	}
	if l.remaining() > 0 {
		l.armExpiry()
		return false
	}
	return true
}

// turn is an extension waiting in a Lock's queue: woken with granted, it
// holds the turn (and must pass it on); without, the Lock is releasing or
// ended.
type turn struct {
	woken   chan struct{}
	granted bool
}

// wake wakes every extension waiting for its turn, without granting it:
// they find the Lock releasing or ended and send nothing (m may be nil).
// l.mu must be held.
func (m *lockMore) wake() {
	if m == nil {
		return
	}
	for _, w := range m.queue {
		close(w.woken)
	}
	m.queue = nil
}

// Extend resets the lock's TTL to ttl on every node that still holds it
// under our owner value. It succeeds only with a quorum and within the
// current validity; the new deadline counts from the start of the
// extension. It never re-creates an expired key.
//
// Extensions of one Lock run one at a time, in call order: a call made
// while another Extend or a watchdog renewal is in flight waits for it
// (or for ctx). While the extension is in flight, Deadline is already
// the earlier of the current deadline and the one it would set: nodes
// that apply it hold the lock no longer than that.
//
// On failure the lock's deadline is never moved later. The error matches
// ErrLockLost when the validity had run out or a quorum no longer holds the
// lock (the Lock then ends: see Done), ErrNotExtended when nodes failed or
// timed out (the lock stays valid until Deadline) or it would pass
// WithMaxHold (also ErrMaxHold), ErrNotHeld after Release, ErrNotHeld and
// the loss's cause (so also ErrLockLost) once the Lock ended with a loss,
// and ctx's error if ctx ended the call; a ctx that is already done sends
// nothing.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if l == nil {
		return fmt.Errorf("%w: extend: nil lock", ErrNotHeld)
	}
	if ctx == nil {
		return invalid("nil context")
	}
	if err := l.c.checkTTL(ttl); err != nil {
		return err
	}
	c := l.c
	if !c.enter() {
		return ErrClosed
	}
	evs, err := l.extendEntered(ctx, ttl)
	for _, e := range evs {
		c.report(ctx, e)
	}
	return err
}

// extendEntered is Extend once the call entered the Client: it returns
// the events to report once the call has left, and Extend's error.
func (l *Lock) extendEntered(ctx context.Context, ttl time.Duration) ([]outcome, error) {
	c := l.c
	defer c.exit() // also on a panic: Close must not wait for this call
	begin := c.o.clock.Now()
	start, evs, err := l.beginExtend(ctx, begin, ttl)
	if err != nil {
		return evs, err
	}
	cmd := node.Extend(l.keys, l.owner, ttl)
	ord := l.ord() // before the round: see successor
	c.prepare(ctx, ttl)
	out := c.round(ctx, opExtend, ttl, c.need, func(ctx context.Context, i int) (int64, bool, error) {
		return ord.run(ctx, i, func() (int64, bool, error) {
			// No after: an extension's yes shows the node kept our
			// key, which a node restarted empty cannot do.
			if _, err := c.before(ctx, i, ttl); err != nil {
				return 0, false, err
			}
			return c.nodes[i].DoValue(ctx, cmd)
		})
	}).Wait(ctx)
	return l.settle(ctx, opExtend, begin, start, ttl, out)
}

// beginExtend waits for the turn of an Extend by ttl that began at begin,
// in call order, and starts it (see startLocked), returning the time its
// round may start. Otherwise it returns the events to report and why not.
func (l *Lock) beginExtend(ctx context.Context, begin time.Time, ttl time.Duration) (time.Time, []outcome, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	mine := false
	switch p := l.life.phase; {
	case p.Idle():
		mine = l.to(lockstate.Extend)
	case p.Extending():
		w := &turn{woken: make(chan struct{})}
		m := l.moreLocked()
		m.queue = append(m.queue, w)
		l.mu.Unlock()
		select {
		case <-w.woken: // our turn, or the Lock is releasing or ended
		case <-ctx.Done():
		}
		l.mu.Lock()
		l.more.leave(w)
		mine = w.granted
	}
	return l.startLocked(ctx, begin, l.c.o.clock.Now(), ttl, opExtend, mine)
}

// beginRenewal starts the watchdog renewal of l by ttl at start, if l is
// held with no extension in flight and no retry of its own pending (else
// it is skipped: ok false, nothing to report).
func (l *Lock) beginRenewal(ctx context.Context, start time.Time, ttl time.Duration) (ok bool, evs []outcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.life.phase.Extending() && l.retry == nil {
		l.retry = clock.AfterFunc(l.c.o.clock, l.retryIn(), l.onRetry) // an Extend is in flight: try again soon
	}
	if !l.life.phase.Idle() || l.retry != nil {
		return false, nil
	}
	if !l.to(lockstate.Extend) {
		return false, nil // l was lost, and fault reports it
	}
	_, evs, err := l.startLocked(ctx, start, start, ttl, opRenew, true)
	return err == nil, evs
}

// startLocked starts an extension of l by ttl whose round starts at
// start, if mine (it has the turn) and l may be extended: it pulls the
// deadline in to start + ttl - drift if that is earlier. Otherwise it ends
// the turn and returns why not, with the events to report. l.mu must be
// held.
func (l *Lock) startLocked(ctx context.Context, begin, start time.Time, ttl time.Duration, o op, mine bool) (time.Time, []outcome, error) {
	c := l.c
	var err error
	expired := false
	switch {
	case l.life.phase == lockstate.Lost || l.life.phase == lockstate.LostReleased: // the loss's cause too, whether its timer fired first or not
		err = fmt.Errorf("%w: %s %s: lock was lost: %w", ErrNotHeld, o, quoteKeys(l.keys), l.life.cause)
	case l.life.over() || l.life.phase.Releasing():
		err = fmt.Errorf("%w: %s %s: lock was released", ErrNotHeld, o, quoteKeys(l.keys))
	case !mine || ctx.Err() != nil: // a call that is already over sends nothing
		err = &QuorumError{Op: o.pub(), Keys: l.keys, Need: c.need, Err: ErrNotExtended, Cause: ctx.Err()}
	case l.remaining() <= 0:
		err, expired = &QuorumError{Op: o.pub(), Keys: l.keys, Need: c.need, Err: ErrLockLost}, true
	case l.maxHold > 0 && start.Add(ttl).After(l.acquired.Add(l.maxHold)):
		err = fmt.Errorf("%w: %s %s by %v would pass the max hold of %v", ErrMaxHold, o, quoteKeys(l.keys), ttl, l.maxHold)
		if o == opRenew {
			l.renewer.remove(l)
		}
	}
	if err == nil {
		if d := start.Add(ttl - driftBudget(ttl, c.o.driftFactor)); d.Before(l.deadline) {
			l.deadline = d
			l.armExpiryIfSet()
		}
		return start, nil, nil
	}
	if mine {
		l.passTurn(lockstate.Skip)
	}
	evs := []outcome{{op: o, keys: l.keys, owner: l.owner, lock: l, begin: begin, err: err, left: l.remaining()}}
	if expired {
		cause := l.expired()
		if l.lose(cause) {
			evs = append(evs, l.lostEvent(cause))
		}
	}
	return time.Time{}, evs, err
}

// leave takes w out of the queue if it is still there (ctx ended its
// wait; m may be nil). l.mu must be held.
func (m *lockMore) leave(w *turn) {
	if m == nil {
		return
	}
	for i, q := range m.queue {
		if q == w {
			m.queue = append(m.queue[:i], m.queue[i+1:]...)
			return
		}
	}
}

// armExpiryIfSet sets the expiry timer again after the deadline was
// pulled in, if a timer is in use. l.mu must be held.
func (l *Lock) armExpiryIfSet() {
	if l.expiry != nil {
		l.armExpiry()
	}
}

// passTurn ends the extension in flight with verdict v (confirm, doubt
// or skip): the next one queued gets the turn, or l is held again; a
// Release waiting for it goes on. l.mu must be held.
func (l *Lock) passTurn(v lockstate.Event) {
	l.to(v) // off the table, l is lost; Release goes on all the same
	if l.life.phase.Idle() && l.more.queued() > 0 {
		m := l.more
		w := m.queue[0]
		m.queue = m.queue[1:]
		w.granted = true
		close(w.woken)
		l.to(lockstate.Extend)
		return
	}
	if l.idle != nil {
		close(l.idle)
		l.idle = nil
	}
}

// settle applies the outcome of an extension or renewal round that
// started at start, and ends its turn: on a quorum within the current
// validity the deadline moves to start + ttl - drift; otherwise it stays
// where startLocked left it, and the Lock ends if too few nodes may still
// hold it. A renewal that failed because nodes failed is retried soon. It
// returns the events to report, once the caller has let go of every lock
// and turn, and the extension's error.
func (l *Lock) settle(ctx context.Context, o op, begin, start time.Time, ttl time.Duration, out quorum.Outcome) ([]outcome, error) {
	c := l.c
	now := c.o.clock.Now()
	newDeadline := start.Add(ttl - driftBudget(ttl, c.o.driftFactor))
	l.mu.Lock()
	defer l.mu.Unlock()
	verdict := lockstate.Doubt
	defer func() { l.passTurn(verdict) }()
	if out.Reached && out.Err == nil && !l.life.over() && start.Before(l.deadline) && newDeadline.Sub(now) > c.o.minValidity {
		verdict = lockstate.Confirm
		l.deadline, l.ttl = newDeadline, ttl
		l.setVotes(out.Votes)
		l.armExpiryIfSet()
		if o == opExtend && l.renewer != nil {
			l.renewBefore()
		}
		return []outcome{{op: o, keys: l.keys, owner: l.owner, lock: l, begin: begin, attempts: 1, round: out, left: l.remaining()}}, nil
	}
	qe := &QuorumError{Op: o.pub(), Keys: l.keys, Need: c.need, Got: out.Yes, Attempts: 1,
		Nodes: c.results(out), Err: ErrNotExtended, Cause: out.Err}
	lost := false
	if l.life.over() {
		qe.Err = ErrNotHeld
	} else if len(c.nodes)-out.No-c.quarantinedPending(out) < c.need || l.remaining() <= 0 { // too few nodes may still hold it
		qe.Err, lost = ErrLockLost, true
	}
	if qe.Cause == nil {
		qe.Cause = ctx.Err()
	}
	evs := []outcome{{op: o, keys: l.keys, owner: l.owner, lock: l, begin: begin, attempts: 1, round: out, err: qe, left: l.remaining()}}
	if lost && l.lose(qe) {
		evs = append(evs, l.lostEvent(qe))
	}
	if o == opRenew && qe.Err == ErrNotExtended && l.life.phase.Extending() {
		l.retry = clock.AfterFunc(c.o.clock, l.retryIn(), l.onRetry)
	}
	return evs, qe
}

// onRetry is the timer of a Lock's retried renewal: it queues the Lock
// for the next batch.
func (l *Lock) onRetry() {
	l.mu.Lock()
	l.retry = nil // due again; see beginRenewal
	l.mu.Unlock()
	l.renewer.due(l)
}

// retryIn is the wait before a failed renewal is tried again: a tenth of
// the interval, but within a quarter of the validity left, so that several
// tries fit before the deadline. l.mu must be held.
func (l *Lock) retryIn() time.Duration {
	d := l.c.o.renewEvery / 10
	if q := l.remaining() / 4; q < d {
		d = q
	}
	if d < time.Millisecond {
		d = time.Millisecond
	}
	return d
}

// beginRelease moves l to releasing, first waiting for the extension in
// flight to settle (bounded by its node deadline), and ends it. It
// returns the validity left and the TTL when Release was called, whether
// Release was called before, the loss that ended l (nil if none), and,
// with handOn, a successor to hand to a local waiter: only if the last
// round confirmed the quorum and validity is left to spare.
func (l *Lock) beginRelease(handOn bool) (left, ttl time.Duration, again bool, lost error, next *Lock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	left, ttl = l.remaining(), l.ttl
	from := l.life.phase
	if !l.to(lockstate.Release) { // no extension starts after this
		return left, ttl, false, l.life.cause, nil
	}
	if from.ReleaseCalled() {
		return left, ttl, true, nil, nil
	}
	if from.Extending() {
		idle := make(chan struct{})
		l.idle = idle
		l.more.wake()
		l.mu.Unlock()
		<-idle // the extension in flight settles, bounded by its node deadline
		l.mu.Lock()
	}
	if l.life.over() { // lost before Release, or while it waited
		return left, ttl, false, l.life.cause, nil
	}
	if handOn && l.life.phase == lockstate.Releasing && l.remaining() > l.c.o.minValidity {
		next = l.successor()
	}
	if !l.move(lockstate.End, ErrReleased) {
		return left, ttl, false, l.life.cause, nil
	}
	return left, ttl, false, nil, next
}

// successor is a fresh Lock for the same hold, for a local waiter. l.mu
// must be held.
func (l *Lock) successor() *Lock {
	now := l.c.o.clock.Now()
	n := &Lock{c: l.c, keys: l.keys, owner: l.owner, won: l.won, acquired: now, renewer: l.renewer,
		runBefore: l.runBefore + now.Sub(l.acquired), passes: l.passes + 1, ttl: l.ttl, deadline: l.deadline, typ: l.typ, name: l.name, hold: l.hold}
	// Nil if l was never extended: no call of l is then in flight to keep
	// in order (ord runs before an extension's round starts).
	n.ordr.Store(l.ordr.Load())
	n.setHeldVotes(l.votes)
	return n
}

// runAge is how long l's run of passes has lasted: since the acquisition
// on the nodes that began it.
func (l *Lock) runAge() time.Duration {
	return l.runBefore + l.c.o.clock.Now().Sub(l.acquired)
}

// markPassed records that l's hold went to its successor.
func (l *Lock) markPassed() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.to(lockstate.Pass)
}

// startPassed starts the life of a successor taken by a waiter with max
// hold maxHold: its expiry timer and, for a watchdog lock, its renewals,
// the first one at the cadence of the last renewal. It returns the
// validity left.
func (l *Lock) startPassed(maxHold time.Duration) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.maxHold = maxHold
	if l.renewer != nil {
		l.armExpiry()
		l.renewer.add(l.c, l)
		l.renewBefore()
	}
	return l.remaining()
}

// renewBefore schedules the next renewal of a watchdog lock earlier than
// the next tick if its deadline needs it: as if its last renewal had been
// a lease, one interval after it. l.mu must be held.
func (l *Lock) renewBefore() {
	c := l.c
	validity := c.o.lease - driftBudget(c.o.lease, c.o.driftFactor)
	next := l.deadline.Add(-(validity - c.o.renewEvery)).Sub(c.o.clock.Now())
	if l.retry == nil && c.o.renewEvery-l.renewer.sinceTick(c) > next {
		l.retry = clock.AfterFunc(c.o.clock, max(next, 0), l.onRetry) // the next tick would come later
	}
}
