package node

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redlock-go/redlock/transport"
)

// Command coalescing (auto-pipelining): while a call to the node is in
// flight, the calls that arrive queue up, and when it returns all of them
// go out as one pipeline (one write, one read on one connection) instead of
// one round trip each. There is no timer: a call that finds nothing in
// flight is sent at once, on its own goroutine, as without coalescing.
//
// The queued calls are sent by a goroutine of the node's (tracked like the
// commands of guarded) that runs batch after batch until the queue is
// empty, so that every caller can still return by its own deadline: a call
// still queued at its deadline is taken out of the queue and fails with a
// not-sent error (MayHaveRun: false); one whose batch was taken may have
// run, as any call cut short after its write.
//
// A release still queued when its caller leaves is not dropped: it stays
// in the queue and is sent, late, with its own budget (the time its caller
// gave it), and its caller's error says it may have run. Dropped, it would
// leave the key until its TTL and keep the next holder out; sent late it
// deletes only its own owner value, so it cannot touch a later holder's
// key, and this Client's next command on the key queues behind it. At most
// maxLate releases wait so on one node (a node frozen for long); past that
// a release is dropped and its caller's error says not sent.
//
// Every caller has at most one command queued or in flight (it waits for
// its answer or its deadline), and the queue is sent in order, so the
// commands of one caller keep their order.
//
// Transports that pipeline on their own (rueidis, valkey-go: concurrent
// commands share one connection's writes) already batch as this does; what
// they lack is the not-sent error of a call whose deadline passed while
// it was queued, and the late send of a release whose caller left.

const (
	maxBatch = 256  // commands of one pipeline
	maxLate  = 4096 // releases left queued by their callers, per node
)

// coalescer is a Node's queue.
type coalescer struct {
	mu      sync.Mutex
	queue   []*pending
	running bool // a call or batch is in flight; the queue is sent after it
	late    int  // queued calls whose callers left (see pending.late)
}

// pending is one queued call.
type pending struct {
	args     []interface{}
	r        transport.Reply  // its reply, once done is closed
	deadline time.Time        // zero: none
	budget   time.Duration    // for a late send: the time its caller gave it
	src      string           // for a late send: the script, for EVAL after NOSCRIPT
	taken    bool             // under coalescer.mu: a batch took it (it may be written)
	late     bool             // under coalescer.mu: its caller left; sent anyway
	durable  bool             // confirmed on disk: its batch ends with a WAITAOF
	aof      *transport.Reply // that WAITAOF's reply, once sent
	aofWait  time.Duration    // its timeout
	done     chan struct{}
}

// notSentError is the error of a call that was never written: its
// deadline passed while it waited in the node's queue.
type notSentError struct{ err error }

func (e *notSentError) Error() string {
	return "node: not sent (still queued behind the node's pipeline): " + e.err.Error()
}
func (e *notSentError) Unwrap() error { return e.err }

// lateError is the error of a release whose caller left while it was
// still queued: it is sent later, so it may run.
type lateError struct{ err error }

func (e *lateError) Error() string {
	return "node: still queued behind the node's pipeline; sent when it returns: " + e.err.Error()
}
func (e *lateError) Unwrap() error { return e.err }

// NotSent reports whether err is the error of a node call that was never
// written to the node (so it cannot have run).
func NotSent(err error) bool {
	var ns *notSentError
	return errors.As(err, &ns)
}

// Coalesce turns command coalescing on for n (see package doc above
// coalescer). Only nodes of one server coalesce: go-redis cluster and
// ring clients keep one command per call. Call it before n is used.
func (n *Node) Coalesce(on bool) {
	n.coalesce = on && n.plain
}

// coalesced is DoValue's call for coalescing nodes: it returns the node's
// reply as do does.
func (n *Node) coalesced(ctx context.Context, c *Cmd) (int64, error) {
	co := &n.co
	co.mu.Lock()
	if !co.running {
		co.running = true
		co.mu.Unlock()
		v, err := n.direct(ctx, c)
		n.next()
		return v, err
	}
	args, _, want := n.wire(c)
	p := &pending{args: args, durable: n.aof && c.grants, done: make(chan struct{})}
	if c.late {
		p.src = c.src
	}
	if d, ok := ctx.Deadline(); ok {
		p.deadline, p.budget = d, time.Until(d)
	}
	co.queue = append(co.queue, p)
	co.mu.Unlock()
	select {
	case <-p.done:
	case <-ctx.Done():
		if err := co.leave(p, c.late, ctx.Err()); err != nil {
			return 0, err
		}
		select {
		case <-p.done: // answered at the deadline after all
		default:
			return 0, ctx.Err()
		}
	}
	v, err := reply(args, p.r)
	if err != nil && keyPos(args) == 3 && isNoScript(err) {
		return n.direct(ctx, c) // EVALSHA again, then EVAL: rare (restart, SCRIPT FLUSH)
	}
	if err = n.process(want, err); err != nil {
		return 0, err
	}
	if err == nil && p.durable && c.yes(v) {
		if derr := confirmed(*p.aof, p.aofWait); derr != nil {
			return 0, derr
		}
	}
	return v, err
}

// leave is called when p's caller's ctx is done before p was answered. A
// call still queued is taken out (not sent), or, if late and there is room,
// left to be sent later; the error (wrapping err) says which. It returns nil if p's batch
// has taken it.
func (co *coalescer) leave(p *pending, late bool, err error) error {
	co.mu.Lock()
	defer co.mu.Unlock()
	switch {
	case p.taken:
		return nil
	case late && co.late < maxLate:
		p.late = true
		co.late++
		return &lateError{err}
	}
	for i, q := range co.queue {
		if q == p {
			co.queue = append(co.queue[:i], co.queue[i+1:]...)
			break
		}
	}
	return &notSentError{err}
}

// direct sends c at once, without coalescing.
func (n *Node) direct(ctx context.Context, c *Cmd) (int64, error) {
	if n.deadlineGuard {
		return n.deadlineGuarded(ctx, c)
	}
	return n.do(ctx, c)
}

// next is called when the call or batch in flight has returned: it starts
// sending the queue, or marks the node idle.
func (n *Node) next() {
	co := &n.co
	co.mu.Lock()
	b := co.take()
	if b == nil {
		co.running = false
		co.mu.Unlock()
		return
	}
	co.mu.Unlock()
	if n.track != nil {
		n.track.Add(1) // the caller of next is itself tracked: the count is not zero
	}
	go n.flush(b)
}

// take removes up to maxBatch calls from the queue; co.mu is held.
func (co *coalescer) take() []*pending {
	k := len(co.queue)
	if k == 0 {
		return nil
	}
	if k > maxBatch {
		k = maxBatch
	}
	b := make([]*pending, k)
	copy(b, co.queue)
	for _, p := range b {
		p.taken = true
		if p.late {
			co.late--
		}
	}
	rest := copy(co.queue, co.queue[k:])
	clear(co.queue[rest:])
	co.queue = co.queue[:rest]
	return b
}

// flush sends batch b, then the batches queued meanwhile, until the queue
// is empty.
func (n *Node) flush(b []*pending) {
	if n.track != nil {
		defer n.track.Done()
	}
	for b != nil {
		n.send(b)
		co := &n.co
		co.mu.Lock()
		if b = co.take(); b == nil {
			co.running = false
		}
		co.mu.Unlock()
	}
}

// send runs b as one pipeline, under the latest deadline of its calls (each
// caller leaves at its own), and wakes its callers.
func (n *Node) send(b []*pending) {
	ctx := context.Background()
	now := time.Now()
	var last time.Time
	for _, p := range b {
		d := p.deadline
		if p.late { // its caller has left: its own budget from now
			d = now.Add(p.budget)
		}
		if d.IsZero() {
			last = time.Time{}
			break
		}
		if d.After(last) {
			last = d
		}
	}
	if !last.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, last)
		defer cancel()
	}
	cmds := make([][]interface{}, len(b), len(b)+1)
	for i, p := range b {
		cmds[i] = p.args
	}
	var w *transport.Reply // one WAITAOF confirms every command of the batch
	var wait time.Duration
	for _, p := range b {
		if p.durable {
			var args []interface{}
			args, wait = waitAOF(ctx)
			cmds = append(cmds, args)
			break
		}
	}
	rs := make([]transport.Reply, len(cmds))
	n.conn.Pipeline(ctx, cmds, rs)
	if len(cmds) > len(b) {
		w = &rs[len(b)]
	}
	for i, p := range b {
		p.r, p.aof, p.aofWait = rs[i], w, wait
	}
	n.retryLate(b)
	for _, p := range b {
		close(p.done)
	}
}

// retryLate sends the late releases of batch b that the node refused for
// not knowing their script (their callers, gone, cannot) again as EVAL,
// all in one pipeline: after a restart a whole batch of them gets NOSCRIPT,
// and one round trip each would hold this node's queue (and Close) for as
// many node timeouts when the node is slow.
func (n *Node) retryLate(b []*pending) {
	var again [][]interface{}
	var budget time.Duration
	for _, p := range b {
		if err := p.r.Err; !p.late || err == nil || p.src == "" || !isNoScript(err) {
			continue
		}
		again = append(again, append([]interface{}{"eval", p.src}, p.args[2:]...))
		budget = max(budget, p.budget)
	}
	if len(again) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	n.conn.Pipeline(ctx, again, make([]transport.Reply, len(again)))
}
