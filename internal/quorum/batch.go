package quorum

import "context"

// BatchCall sends one request carrying every item of a batch to node. It
// sets ok[j] when the node said yes to item j and errs[j] when item j
// failed there; ok and errs have one entry per item and are the call's
// own. It must return when ctx is done.
type BatchCall func(ctx context.Context, node int, ok []bool, errs []error)

// StartBatch sends call to every node, each on its own goroutine, and
// returns the outcome of each of the m items as soon as every item is
// decided, each by the rule of a round (Config.Need counted yes votes, or
// too few countable nodes left). A node's answer counts on every item
// until the last one is decided; nodes that had not answered then are
// reported with ErrPending. Slower calls run on until ctx ends, each
// counted in Config.Track. Observe, if
// set, receives each node's vote on each item (m calls per node), on time
// or late. Since every call returns by ctx's end, so does StartBatch;
// Outcome.Err is nil.
func StartBatch(ctx context.Context, cfg Config, m int, call BatchCall) []Outcome {
	n := cfg.N
	b := &batch{outs: make([]Outcome, m), got: make([]bool, n), ctx: ctx, fn: call}
	b.off = make([]bool, n)
	b.done = make(chan struct{})
	b.init(cfg, make([]tally, m))
	votes := make([]Vote, m*n)
	for j := range b.outs {
		b.outs[j].Votes = votes[j*n : (j+1)*n : (j+1)*n]
	}
	oks, errs := make([]bool, m*n), make([]error, m*n)
	if cfg.Track != nil {
		cfg.Track.Add(n)
	}
	for i := 0; i < n; i++ {
		ok, err := oks[i*m:(i+1)*m:(i+1)*m], errs[i*m:(i+1)*m:(i+1)*m]
		if cfg.Workers != nil {
			cfg.Workers.Go(func() { b.call(i, ok, err) })
		} else {
			go b.call(i, ok, err)
		}
	}
	<-b.done
	b.mu.Lock()
	defer b.mu.Unlock()
	// Late answers touch no outcome: once frozen here, they are final.
	for j := range b.outs {
		for i := range b.got {
			if !b.got[i] {
				b.outs[j].Votes[i] = Vote{Err: ErrPending, Discounted: b.off[i]}
			}
		}
		b.outs[j] = b.tallies[j].outcome(b.outs[j].Votes, nil)
	}
	return b.outs
}

// batch is one StartBatch in progress.
type batch struct {
	core
	outs []Outcome // per item; Votes set by the calls until the decision
	got  []bool    // per node: it answered before the decision
	ctx  context.Context
	fn   BatchCall
}

// call runs on its own goroutine.
func (b *batch) call(i int, ok []bool, errs []error) {
	if b.cfg.Track != nil {
		defer b.cfg.Track.Done()
	}
	b.fn(b.ctx, i, ok, errs)
	latency := b.cfg.Now().Sub(b.start)
	b.mu.Lock()
	onTime := !b.decided
	if onTime {
		b.got[i] = true
		for j := range b.outs {
			v := Vote{OK: ok[j] && errs[j] == nil, Err: errs[j], Latency: latency, Done: true, Discounted: b.off[i]}
			b.outs[j].Votes[i] = v
			b.count(j, v)
		}
		b.settle()
	}
	b.mu.Unlock()
	if b.cfg.Observe != nil {
		for j := range ok {
			b.cfg.Observe(i, Vote{OK: ok[j] && errs[j] == nil, Err: errs[j], Latency: latency, Done: onTime, Discounted: b.off[i]})
		}
	}
}
