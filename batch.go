package redlock

import (
	"context"
	"sync"
	"time"

	"github.com/redlock-go/redlock/node"
	"github.com/redlock-go/redlock/quorum"
)

// renewRound sends the renewals rs to every node at once, one
// node.ExtendMany (one round trip) each, and returns each lock's outcome
// as soon as every lock's is decided: a quorum said yes, or too few nodes
// are left to make one (the rule of package quorum, applied per lock).
// Slower nodes are not waited for; their calls run on to their deadline,
// counted in c.wg so that Close waits for them. A batch's calls get the
// release deadline: it carries many locks, and no caller waits on it.
func (c *Client) renewRound(rs []node.Renewal, ttl time.Duration) []quorum.Outcome {
	n := len(c.nodes)
	b := &batchRound{need: c.need, n: n, open: len(rs), done: make(chan struct{}),
		outs: make([]quorum.Outcome, len(rs)), got: make([]bool, n), off: make([]bool, n)}
	if counts := c.counts(opRenew); counts != nil {
		for i := range b.off {
			b.off[i] = !counts(i)
		}
	}
	for i := range b.off {
		if !b.off[i] {
			b.pending++
		}
	}
	b.running = n
	votes := make([]quorum.Vote, len(rs)*n)
	for j := range b.outs {
		b.outs[j].Votes = votes[j*n : (j+1)*n : (j+1)*n]
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.releaseTimeout(ttl))
	b.cancel = cancel // by the last call to return
	canSkip := c.canSkip(opRenew, c.need)
	start := c.o.clock.Now()
	c.wg.Add(n)
	for i := 0; i < n; i++ {
		go func(i int) {
			defer c.wg.Done()
			ok, errs := make([]bool, len(rs)), make([]error, len(rs))
			_, _, err := c.call(ctx, i, canSkip, func(ctx context.Context, i int) (bool, error) {
				return true, c.nodes[i].ExtendMany(ctx, rs, ok, errs)
			}, nil)
			if notSent(err) {
				for j := range errs {
					errs[j] = err
				}
			}
			onTime := b.answer(i, ok, errs, c.o.clock.Now().Sub(start))
			if len(c.o.nodeObs) > 0 {
				for j := range rs {
					c.observeNode(opRenew, i, quorum.Vote{OK: ok[j] && errs[j] == nil, Err: errs[j], Done: onTime})
				}
			}
		}(i)
	}
	<-b.done
	return b.outs
}

// batchRound collects the answers of a batch's node calls and decides
// every lock of it.
type batchRound struct {
	mu      sync.Mutex
	need, n int
	outs    []quorum.Outcome // per lock; frozen once decided
	got     []bool           // per node: it answered before the decision
	off     []bool           // per node: its yes does not count (see votes.go)
	pending int              // countable nodes that have not answered
	running int              // node calls that have not returned
	open    int              // locks not decided yet
	decided bool
	done    chan struct{}
	cancel  context.CancelFunc
}

// answer records node i's answers and reports whether they came before
// the decision. The last node to answer ends the calls' context.
func (b *batchRound) answer(i int, ok []bool, errs []error, latency time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running--; b.running == 0 {
		defer b.cancel()
	}
	if b.decided {
		return false
	}
	before := b.pending
	if !b.off[i] {
		b.pending--
	}
	b.got[i] = true
	for j := range b.outs {
		o := &b.outs[j]
		wasOpen := o.Yes < b.need && o.Yes+before >= b.need
		v := quorum.Vote{OK: ok[j] && errs[j] == nil, Err: errs[j], Latency: latency, Done: true, Discounted: b.off[i]}
		o.Votes[i] = v
		switch {
		case v.OK && v.Discounted:
		case v.OK:
			o.Yes++
		case v.Err != nil:
			o.Failed++
		default:
			o.No++
		}
		if wasOpen && (o.Yes >= b.need || o.Yes+b.pending < b.need) {
			b.open--
		}
	}
	if b.open == 0 || b.pending == 0 || b.running == 0 {
		b.decide()
	}
	return true
}

// decide freezes the outcomes: nodes that have not answered get
// ErrPending. b.mu must be held.
func (b *batchRound) decide() {
	b.decided = true
	for j := range b.outs {
		o := &b.outs[j]
		o.Reached = o.Yes >= b.need
		for i := range o.Votes {
			if !b.got[i] {
				o.Votes[i] = quorum.Vote{Err: quorum.ErrPending, Discounted: b.off[i]}
			}
		}
	}
	close(b.done)
}
