// Package quorum sends one call to N nodes in parallel and decides as soon as
// the outcome is known: when enough nodes said yes, or when so many said no or
// failed that a quorum can no longer be reached. It does not wait for slow
// nodes; the round keeps their answers as they arrive after the decision
// (Then, Answer), so its owner can act on each node's final answer.
// StartBatch puts many questions to every node in one call each and
// decides each question on its own quorum, by the same count.
package quorum

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redlock-go/redlock/observe"
)

// Check reports whether need votes out of n make a safe quorum: two holders
// can never both collect need votes, which requires need > n/2.
func Check(n, need int) error {
	switch {
	case n < 1:
		return fmt.Errorf("quorum: %d nodes, need at least 1", n)
	case need > n:
		return fmt.Errorf("quorum: %d of %d nodes is more than there are", need, n)
	case need <= n/2:
		return fmt.Errorf("quorum: %d of %d nodes would let two holders in at once (need more than %d)", need, n, n/2)
	}
	return nil
}

// Tracker counts calls in flight (a *sync.WaitGroup is one).
type Tracker interface {
	Add(delta int)
	Done()
}

// ErrPending is the error of a node that had not answered when the round
// was decided.
var ErrPending = observe.ErrPending

// Vote is what one node answered.
type Vote struct {
	// (The bools come last, together: 40 bytes, not 48. Rounds and Locks
	// keep one per node.)
	Value   int64         // what the yes carried (a ValueCall's value); 0 otherwise
	Err     error         // the call failed (the node's state is unknown)
	Latency time.Duration // time from the start of the round to the answer
	OK      bool          // the node said yes
	Done    bool          // the node answered before the decision
	// Discounted is set on a node whose yes does not count toward Need
	// (Config.Counts said so when the round started).
	Discounted bool
}

// Call is the request sent to one node. It must return when ctx is done.
type Call func(ctx context.Context, node int) (bool, error)

// ValueCall is a Call whose yes carries a value (for example a node's
// candidate fencing token), kept in Vote.Value.
type ValueCall func(ctx context.Context, node int) (value int64, ok bool, err error)

// Config describes one round.
type Config struct {
	N    int // number of nodes
	Need int // yes votes that decide the round

	// Counts reports whether a yes from node counts toward Need (a node
	// under suspicion still receives the call, but its vote is discounted).
	// It is asked once per node when the round starts. Nil counts every
	// vote.
	Counts func(node int) bool

	// Observe, if set, receives every vote, on time or late (v.Done
	// false), on the goroutine that made the call, after the vote was
	// counted and before the Then callback.
	Observe func(node int, v Vote)

	// Track, if set, is incremented for each call and decremented when it
	// returns, so an owner can wait for stragglers.
	Track Tracker

	// Now is the time source for latencies; nil means time.Now.
	Now func() time.Time

	// Workers, if set, runs the calls on parked goroutines (see Workers);
	// nil: one new goroutine per call.
	Workers *Workers

	// Inline runs the call of a one-node round (N == 1) on the goroutine
	// that starts it, before Start returns: for a round whose owner waits
	// for that answer in any case (its wait cannot end first), where a
	// goroutine would only add two switches. Ignored when N > 1.
	Inline bool
}

// Outcome is the state of a round at its decision.
type Outcome struct {
	Votes   []Vote // per node, in node order
	Yes     int    // counted yes votes
	No      int    // nodes that answered no
	Failed  int    // nodes whose call returned an error
	Reached bool   // Yes >= Need
	Err     error  // ctx's error if the round was cut short by ctx
}

// Round is one fan-out in progress.
type Round struct {
	core
	wg      sync.WaitGroup
	votes   []Vote // at the decision; frozen after it
	answers []Vote // every answer as it arrives, late ones included
	arrived []bool // answers[i] is set
	then    Listener
	cond    sync.Cond // broadcast on every answer; L is &mu
	inline  [5]Vote   // backing for votes up to 5 nodes (the usual deployments), saving an allocation
	inlineA [5]Vote
	inlineB [5]bool
	inlineC [5]bool
	inlineT [1]tally
	// (The round's ctx and call travel with each call's task (calls), not
	// here: a Round on five nodes then fits the 768-byte size class, with
	// the runtime's 8-byte header: keep it at most 760 bytes.)
}

// Start sends call to every node, each on its own goroutine, and returns at
// once. ctx is passed to every call. It is StartValue for calls whose yes
// carries no value.
func Start(ctx context.Context, cfg Config, call Call) *Round {
	return start(ctx, cfg, func(ctx context.Context, i int) (int64, bool, error) {
		ok, err := call(ctx, i)
		return 0, ok, err
	})
}

// StartValue is Start for calls whose yes carries a value.
func StartValue(ctx context.Context, cfg Config, call ValueCall) *Round {
	return start(ctx, cfg, call)
}

func start(ctx context.Context, cfg Config, call ValueCall) *Round {
	r := &Round{}
	r.cond.L = &r.mu
	if cfg.N <= len(r.inline) {
		r.votes, r.answers, r.arrived, r.off = r.inline[:cfg.N], r.inlineA[:cfg.N], r.inlineB[:cfg.N], r.inlineC[:cfg.N]
	} else {
		r.votes, r.answers, r.arrived, r.off = make([]Vote, cfg.N), make([]Vote, cfg.N), make([]bool, cfg.N), make([]bool, cfg.N)
	}
	r.init(cfg, r.inlineT[:])
	if cfg.Track != nil {
		cfg.Track.Add(cfg.N)
	}
	r.wg.Add(cfg.N)
	if cfg.Inline && cfg.N == 1 {
		r.call(ctx, call, 0)
		return r
	}
	for i := 0; i < cfg.N; i++ {
		if cfg.Workers != nil {
			cfg.Workers.Go(func() { r.call(ctx, call, i) })
		} else {
			go r.call(ctx, call, i)
		}
	}
	return r
}

// call runs one round's call to one node, on a goroutine of its own. (Not
// errgroup: it would add two allocations per node and call, and its
// first-error cancel is not wanted here: every node must get the request.)
func (r *Round) call(ctx context.Context, fn ValueCall, i int) {
	defer r.wg.Done()
	if r.cfg.Track != nil {
		defer r.cfg.Track.Done()
	}
	val, ok, err := fn(ctx, i)
	r.record(i, val, ok, err)
}

func (r *Round) record(i int, val int64, ok bool, err error) {
	v := Vote{OK: ok && err == nil, Err: err, Latency: r.cfg.Now().Sub(r.start), Discounted: r.off[i]}
	if v.OK {
		v.Value = val
	}
	r.mu.Lock()
	late := r.decided
	if !late {
		v.Done = true
		r.votes[i] = v
		r.count(0, v)
		r.settle()
	}
	r.answers[i], r.arrived[i] = v, true
	then := r.then
	r.cond.Broadcast()
	r.mu.Unlock()
	if r.cfg.Observe != nil {
		r.cfg.Observe(i, v)
	}
	if then != nil {
		then.Heard(i, v, true)
	}
}

// Listener receives every node's final answer of a round (see ThenTo).
type Listener interface {
	Heard(node int, v Vote, later bool)
}

// thenFunc is a Then callback as a Listener (a func value fits in an
// interface without an allocation).
type thenFunc func(node int, v Vote, later bool)

func (f thenFunc) Heard(node int, v Vote, later bool) { f(node, v, later) }

// Then calls fn once with every node's final answer: at once, on the
// caller's goroutine and with later false, for the nodes that have
// answered; for each other node when its call returns, on that call's
// goroutine and with later true (possibly before Then has returned). It
// must be called at most once per round.
func (r *Round) Then(fn func(node int, v Vote, later bool)) { r.ThenTo(thenFunc(fn)) }

// ThenTo is Then with a Listener: a pointer that implements it needs no
// closure.
func (r *Round) ThenTo(fn Listener) {
	r.mu.Lock()
	r.then = fn
	var buf [8]int
	now := buf[:0]
	for i, ok := range r.arrived {
		if ok {
			now = append(now, i)
		}
	}
	answers := r.answers
	r.mu.Unlock()
	for _, i := range now {
		fn.Heard(i, answers[i], false) // answers[i] does not change once arrived
	}
}

// Answer blocks until node's call has returned (each call ends at its own
// deadline) and returns its answer, on time or late.
func (r *Round) Answer(node int) Vote {
	r.mu.Lock()
	defer r.mu.Unlock()
	for !r.arrived[node] {
		r.cond.Wait()
	}
	return r.answers[node]
}

// Until waits for answers, past the decision too, until enough returns
// true, every node has answered, or ctx is done, and returns enough's
// last verdict. enough sees every answer so far (answers[i] is node i's
// when arrived[i]); it is called at once, then after each answer, under
// the round's lock: it must not call the round nor keep the slices. Each
// call ends at its own deadline, so Until returns by the latest of them
// even if ctx cannot end.
func (r *Round) Until(ctx context.Context, enough func(answers []Vote, arrived []bool) bool) bool {
	r.mu.Lock()
	ok, over := enough(r.answers, r.arrived), r.allArrived()
	r.mu.Unlock()
	if ok || over || ctx.Err() != nil {
		return ok
	}
	stop := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		r.cond.Broadcast()
		r.mu.Unlock()
	})
	defer stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		if ok = enough(r.answers, r.arrived); ok || r.allArrived() || ctx.Err() != nil {
			return ok
		}
		r.cond.Wait() // every answer broadcasts (record), and so does ctx's end
	}
}

// allArrived reports whether every node has answered. r.mu must be held.
func (r *Round) allArrived() bool {
	for _, ok := range r.arrived {
		if !ok {
			return false
		}
	}
	return true
}

// Wait returns the outcome as soon as the round is decided, or when ctx is
// done (then Outcome.Err is ctx's error, unless the quorum was reached
// first). Nodes that have not answered are reported with
// ErrPending.
func (r *Round) Wait(ctx context.Context) Outcome {
	var ctxErr error
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.decided:
	case ctx.Done() == nil: // cannot end: every answer broadcasts (record)
		for !r.decided {
			r.cond.Wait()
		}
	default: // the done channel is made only for a wait that may end first
		if r.done == nil {
			r.done = make(chan struct{})
		}
		done := r.done
		r.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			ctxErr = ctx.Err()
		}
		r.mu.Lock()
	}
	t := &r.tallies[0]
	if !r.decided {
		r.decided = true
		if r.done != nil {
			close(r.done)
		}
	} else if t.yes >= t.need {
		ctxErr = nil
	} else {
		ctxErr = ctx.Err() // calls failed because ctx ended
	}
	// Late answers do not touch r.votes, so after the decision it is
	// frozen and can be handed out without a copy.
	for i := range r.votes {
		if !r.votes[i].Done {
			r.votes[i] = Vote{Err: ErrPending, Discounted: r.off[i]}
		}
	}
	return t.outcome(r.votes, ctxErr)
}

// WaitAll blocks until every call has returned, stragglers included.
func (r *Round) WaitAll() { r.wg.Wait() }
