package quorum

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// item is one node's scripted answer to one item of a batch.
type item struct {
	ok  bool
	err error
}

// runBatch runs a batch whose node i answers script[i] (one entry per
// item); nodes in slow answer only when the returned release is called.
// release waits for every call to return.
func runBatch(t *testing.T, cfg Config, script [][]item, slow map[int]bool) ([]Outcome, func()) {
	t.Helper()
	gate := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	cfg.Track = &wg
	outs := StartBatch(context.Background(), cfg, len(script[0]), func(ctx context.Context, i int, ok []bool, errs []error) {
		if slow[i] {
			<-gate
		}
		for j, a := range script[i] {
			ok[j], errs[j] = a.ok, a.err
		}
	})
	return outs, func() { once.Do(func() { close(gate) }); wg.Wait() }
}

// Each item is decided on its own quorum from the same answers, and its
// counts are those of the votes in before the decision.
func TestBatchDecidesEachItem(t *testing.T) {
	y, n, f := item{ok: true}, item{}, item{err: errDown}
	// Items: 0 all yes; 1 yes on two nodes; 2 no on all; 3 failed on two.
	script := [][]item{
		{y, y, n, f},
		{y, y, n, f},
		{y, n, n, y},
	}
	outs, done := runBatch(t, Config{N: 3, Need: 2}, script, nil)
	done()
	for j, reached := range []bool{true, true, false, false} {
		o := outs[j]
		if o.Reached != reached || o.Err != nil {
			t.Errorf("item %d: %+v, want reached %v", j, o, reached)
		}
		var yes, no, failed int
		for i, v := range o.Votes {
			switch {
			case !v.Done:
				if !errors.Is(v.Err, ErrPending) {
					t.Errorf("item %d node %d: not in, but %+v", j, i, v)
				}
				continue
			case v.OK != script[i][j].ok || v.Err != script[i][j].err:
				t.Errorf("item %d node %d: vote %+v, want %+v", j, i, v, script[i][j])
			}
			switch {
			case v.Err != nil:
				failed++
			case v.OK:
				yes++
			default:
				no++
			}
		}
		if o.Yes != yes || o.No != no || o.Failed != failed {
			t.Errorf("item %d: counted %d/%d/%d, votes in say %d/%d/%d", j, o.Yes, o.No, o.Failed, yes, no, failed)
		}
	}
}

// The batch returns once every item is decided, without the slow node;
// its answer comes late, reaches Observe but no outcome.
func TestBatchLateAnswers(t *testing.T) {
	y, n := item{ok: true}, item{}
	var mu sync.Mutex
	var late []Vote
	cfg := Config{N: 3, Need: 2, Observe: func(i int, v Vote) {
		if i == 2 {
			mu.Lock()
			late = append(late, v)
			mu.Unlock()
		}
	}}
	// Item 0 is reached and item 1 lost by nodes 0 and 1 alone.
	outs, done := runBatch(t, cfg, [][]item{{y, n}, {y, n}, {y, y}}, map[int]bool{2: true})
	if !outs[0].Reached || outs[1].Reached || outs[1].No != 2 {
		t.Fatalf("outcomes %+v", outs)
	}
	for j := range outs {
		if v := outs[j].Votes[2]; v.Done || !errors.Is(v.Err, ErrPending) {
			t.Fatalf("item %d: slow node's vote %+v, want ErrPending", j, v)
		}
	}
	done()
	mu.Lock()
	defer mu.Unlock()
	if len(late) != 2 || late[0].Done || !late[0].OK || !late[1].OK {
		t.Fatalf("late votes observed: %+v, want two late yes", late)
	}
	if outs[1].Reached || outs[1].Yes != 0 || outs[1].Votes[2].Err != ErrPending {
		t.Fatal("an outcome changed after the decision")
	}
}

// An item decided early keeps counting answers until the last item is
// decided, as one round counts until its decision.
func TestBatchCountsUntilLastItemDecided(t *testing.T) {
	y, n := item{ok: true}, item{}
	// Item 0 is reached by nodes 0-2; item 1 needs node 3 or 4 too.
	script := [][]item{{y, y}, {y, y}, {y, n}, {n, y}, {y, n}}
	outs, done := runBatch(t, Config{N: 5, Need: 3}, script, nil)
	done()
	if !outs[0].Reached || !outs[1].Reached {
		t.Fatalf("outcomes %+v", outs)
	}
	for j := range outs {
		o := outs[j]
		answered := 0
		for _, v := range o.Votes {
			if v.Done {
				answered++
			}
		}
		if o.Yes+o.No+o.Failed != answered {
			t.Errorf("item %d: %d counted, %d answered before the decision", j, o.Yes+o.No+o.Failed, answered)
		}
	}
}

// A discounted node's yes counts for no item; too many discounted nodes
// decide every item at once.
func TestBatchDiscountedNodes(t *testing.T) {
	// Node 0 (discounted) and node 1 say yes; node 2 says no once both
	// are counted, so that the decision waits for it.
	counted := make(chan struct{})
	var n01 sync.WaitGroup
	n01.Add(2)
	go func() { n01.Wait(); close(counted) }()
	cfg := Config{N: 3, Need: 2, Counts: func(i int) bool { return i != 0 }, Observe: func(i int, v Vote) {
		if i < 2 {
			n01.Done()
		}
	}}
	outs := StartBatch(context.Background(), cfg, 1, func(ctx context.Context, i int, ok []bool, errs []error) {
		if i == 2 {
			<-counted
		}
		ok[0] = i < 2
	})
	<-counted
	if o := outs[0]; o.Reached || o.Yes != 1 || o.No != 1 {
		t.Fatalf("discounted yes counted: %+v", o)
	}
	if v := outs[0].Votes; !v[0].Discounted || !v[0].OK || v[1].Discounted {
		t.Fatalf("votes not marked by Counts: %+v", v)
	}

	y := item{ok: true}

	cfg = Config{N: 3, Need: 2, Counts: func(i int) bool { return i == 0 }}
	outs, done := runBatch(t, cfg, [][]item{{y}, {y}, {y}}, map[int]bool{0: true, 1: true, 2: true})
	defer done()
	if outs[0].Reached || !errors.Is(outs[0].Votes[0].Err, ErrPending) {
		t.Fatalf("with one countable node: %+v, want decided at once, unreached", outs[0])
	}
}

// When every node fails, every item fails.
func TestBatchAllFail(t *testing.T) {
	f := item{err: errDown}
	cfg := Config{N: 3, Need: 2}
	outs, done := runBatch(t, cfg, [][]item{{f, f}, {f, f}, {f, f}}, nil)
	done()
	for j, o := range outs {
		if o.Reached || o.Yes != 0 || o.Failed < 2 {
			t.Errorf("item %d: %+v, want failed", j, o)
		}
	}
}
