package redlock

import (
	"context"
	"sync"
)

// order keeps the extension calls of one hold (a Lock and the successors
// it is handed to, which share its owner value) in order on each node: a
// call to node i is sent only after the previous one to node i returned.
// An extension returns at its quorum while calls to slower nodes run on;
// without this, such a straggler of an earlier extension could land after
// a later one's PEXPIRE and leave the keys there with the older TTL while
// the Lock keeps the later deadline. Extensions of one hold already run
// one at a time (see Lock); this orders their stragglers too.
type order struct {
	mu   sync.Mutex
	last []chan struct{} // per node: closed when the latest call to it returned; nil: none yet
}

func newOrder(n int) *order { return &order{last: make([]chan struct{}, n)} }

// enter registers a call to node i and returns the previous call's
// channel (nil: none in flight) and the call's own, to close once it
// returned.
func (o *order) enter(i int) (prev <-chan struct{}, mine chan struct{}) {
	mine = make(chan struct{})
	o.mu.Lock()
	p := o.last[i]
	o.last[i] = mine
	o.mu.Unlock()
	if p != nil {
		select {
		case <-p:
		default:
			prev = p
		}
	}
	return prev, mine
}

// exit ends the call to node i that enter gave mine: a later call to
// node i need not wait for it. The order forgets mine if no later call
// came, so that a held Lock does not keep a closed channel per node.
func (o *order) exit(i int, mine chan struct{}) {
	o.mu.Lock()
	if o.last[i] == mine {
		o.last[i] = nil // nil and closed mean the same to enter
	}
	o.mu.Unlock()
	close(mine)
}

// wait waits for prev (may be nil) within ctx. If ctx ends first, the
// call to node i must not be sent: mine is then ended after prev, so that
// the order holds for the calls after it, and wait returns a not-sent
// error.
func (o *order) wait(ctx context.Context, i int, prev <-chan struct{}, mine chan struct{}) error {
	if prev == nil {
		return nil
	}
	select {
	case <-prev:
		return nil
	case <-ctx.Done():
		go func() { <-prev; o.exit(i, mine) }()
		return &notSentError{msg: "redlock: not sent: the previous extension's call to this node was still in flight",
			why: "our previous extension there was still in flight", err: ctx.Err()}
	}
}

// run sends call to node i once the previous extension call there has
// returned (see wait).
func (o *order) run(ctx context.Context, i int, call func() (int64, bool, error)) (int64, bool, error) {
	prev, mine := o.enter(i)
	if err := o.wait(ctx, i, prev, mine); err != nil {
		return 0, false, err
	}
	defer o.exit(i, mine)
	return call()
}
