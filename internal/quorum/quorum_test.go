package quorum

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"
)

// scripted answers per node; a node with block waits until released.
type answer struct {
	ok    bool
	err   error
	block bool
}

func run(t *testing.T, cfg Config, answers []answer) (Outcome, func(), *Round) {
	t.Helper()
	release := make(chan struct{})
	var once sync.Once
	r := Start(context.Background(), cfg, func(ctx context.Context, i int) (bool, error) {
		a := answers[i]
		if a.block {
			select {
			case <-release:
			case <-ctx.Done():
				return false, ctx.Err()
			}
		}
		return a.ok, a.err
	})
	out := r.Wait(context.Background())
	return out, func() { once.Do(func() { close(release) }); r.WaitAll() }, r
}

var errDown = errors.New("down")

func TestDecision(t *testing.T) {
	yes, no, fail, slow := answer{ok: true}, answer{}, answer{err: errDown}, answer{ok: true, block: true}
	cases := []struct {
		name    string
		need    int
		answers []answer
		reached bool
		yes     int
	}{
		{"all yes", 3, []answer{yes, yes, yes, yes, yes}, true, 3},
		{"quorum despite slow minority", 3, []answer{yes, yes, yes, slow, slow}, true, 3},
		{"impossible without waiting for slow", 3, []answer{no, no, fail, slow, slow}, false, 0},
		{"one of one", 1, []answer{yes}, true, 1},
		{"one of one fails", 1, []answer{fail}, false, 0},
		{"all required, one no", 3, []answer{yes, no, slow}, false, 1},
		{"majority of three", 2, []answer{no, yes, yes}, true, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, done, _ := run(t, Config{N: len(tc.answers), Need: tc.need}, tc.answers)
			defer done()
			if out.Reached != tc.reached {
				t.Fatalf("Reached = %v, want %v (%+v)", out.Reached, tc.reached, out)
			}
			if tc.reached && out.Yes < tc.yes || !tc.reached && out.Yes > tc.yes {
				t.Fatalf("Yes = %d, want %d", out.Yes, tc.yes)
			}
			for i, a := range tc.answers {
				if a.block && out.Votes[i].Done {
					t.Fatalf("blocked node %d reported as answered", i)
				}
				if a.block && !errors.Is(out.Votes[i].Err, ErrPending) {
					t.Fatalf("blocked node %d: Err = %v, want ErrPending", i, out.Votes[i].Err)
				}
			}
		})
	}
}

// The round keeps every answer, late ones included: Then hands each node's
// final answer over once (at once for those in, later for the rest), and
// Answer waits for one node's.
func TestLateVotesReachThenAndAnswer(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]Vote{}
	cfg := Config{N: 3, Need: 2, Observe: func(i int, v Vote) { mu.Lock(); seen[i] = v; mu.Unlock() }}
	out, done, r := run(t, cfg, []answer{{ok: true}, {ok: true}, {ok: true, block: true}})
	if !out.Reached || !errors.Is(out.Votes[2].Err, ErrPending) {
		t.Fatalf("outcome %+v", out)
	}
	type got struct {
		v     Vote
		later bool
	}
	then := map[int]got{}
	r.Then(func(i int, v Vote, later bool) { mu.Lock(); then[i] = got{v, later}; mu.Unlock() })
	mu.Lock()
	if len(then) != 2 || then[0].later || then[1].later {
		t.Fatalf("Then before node 2 answered: %+v", then)
	}
	mu.Unlock()
	answered := make(chan Vote)
	go func() { answered <- r.Answer(2) }()
	done()
	if v := <-answered; !v.OK || v.Done {
		t.Fatalf("Answer(2) = %+v, want a late yes", v)
	}
	mu.Lock()
	defer mu.Unlock()
	if g := then[2]; !g.later || !g.v.OK || len(then) != 3 {
		t.Fatalf("Then: %+v", then)
	}
	// Observe sees every vote: the two on time as Done, the late one not.
	if len(seen) != 3 || !seen[0].Done || !seen[1].Done || seen[2].Done || !seen[2].OK {
		t.Fatalf("observed = %+v, want all three, node 2 late", seen)
	}
	if out.Votes[2].Err != ErrPending {
		t.Fatal("the outcome's votes changed after the decision")
	}
}

// Until sees answers that come after the decision, and ends when enough
// says so, when every node has answered, or with ctx.
func TestUntilSeesLateAnswers(t *testing.T) {
	late := func(answers []Vote, arrived []bool) bool { return arrived[2] && errors.Is(answers[2].Err, errDown) }
	out, done, r := run(t, Config{N: 3, Need: 2}, []answer{{}, {}, {err: errDown, block: true}})
	if out.Reached || !errors.Is(out.Votes[2].Err, ErrPending) {
		t.Fatalf("outcome %+v, want decided without node 2", out)
	}
	got := make(chan bool)
	go func() { got <- r.Until(context.Background(), late) }()
	select {
	case ok := <-got:
		t.Fatalf("Until returned %v before node 2 answered", ok)
	default:
	}
	done()
	if !<-got {
		t.Fatal("Until did not see node 2's late answer")
	}
	never := func([]Vote, []bool) bool { return false }
	if r.Until(context.Background(), never) {
		t.Fatal("Until true with enough never true")
	}

	_, done2, r2 := run(t, Config{N: 3, Need: 2}, []answer{{}, {}, {block: true}})
	defer done2()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { got <- r2.Until(ctx, never) }()
	cancel()
	if <-got {
		t.Fatal("Until true after ctx ended")
	}
}

func TestDiscountedVotes(t *testing.T) {
	// Node 0 is discounted: its yes does not count, so 2 of the other two
	// are needed.
	cfg := Config{N: 3, Need: 2, Counts: func(i int) bool { return i != 0 }}
	out, done, _ := run(t, cfg, []answer{{ok: true}, {ok: true}, {}})
	defer done()
	if out.Reached || out.Yes > 1 {
		t.Fatalf("discounted vote counted: %+v", out)
	}
	if !out.Votes[0].Discounted || out.Votes[1].Discounted {
		t.Fatalf("votes not marked by Counts: %+v", out.Votes)
	}
	// Counts is asked once per node, at the start: a gate that changes
	// mid-round does not unbalance the count.
	calls := 0
	cfg = Config{N: 3, Need: 2, Counts: func(int) bool { calls++; return true }}
	_, done3, _ := run(t, cfg, []answer{{ok: true}, {ok: true}, {ok: true}})
	done3()
	if calls != 3 {
		t.Fatalf("Counts asked %d times for 3 nodes, want 3", calls)
	}
	// Too many discounted nodes: impossible from the start, decided at once.
	cfg = Config{N: 3, Need: 2, Counts: func(i int) bool { return i == 0 }}
	out, done2, _ := run(t, cfg, []answer{{ok: true}, {ok: true}, {ok: true}})
	defer done2()
	if out.Reached {
		t.Fatalf("reached with one countable node: %+v", out)
	}
}

func TestWaitHonorsContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	r := Start(ctx, Config{N: 2, Need: 2}, func(ctx context.Context, i int) (bool, error) {
		<-ctx.Done()
		return false, ctx.Err()
	})
	out := r.Wait(ctx)
	r.WaitAll()
	if out.Reached || !errors.Is(out.Err, context.DeadlineExceeded) {
		t.Fatalf("out = %+v", out)
	}
}

func TestTrack(t *testing.T) {
	var wg sync.WaitGroup
	_, done, _ := run(t, Config{N: 3, Need: 2, Track: &wg}, []answer{{ok: true}, {ok: true}, {block: true}})
	done()
	wg.Wait() // returns only if every call was accounted for
}

func TestCheck(t *testing.T) {
	cases := []struct {
		n, need int
		ok      bool
	}{
		{1, 1, true}, {3, 2, true}, {5, 3, true}, {5, 5, true}, {5, 4, true},
		{0, 0, false}, {3, 1, false}, {4, 2, false}, {5, 6, false}, {5, 2, false},
	}
	for _, tc := range cases {
		if err := Check(tc.n, tc.need); (err == nil) != tc.ok {
			t.Errorf("Check(%d, %d) = %v, want ok=%v", tc.n, tc.need, err, tc.ok)
		}
	}
}

func TestStartValueKeepsYesValues(t *testing.T) {
	r := StartValue(context.Background(), Config{N: 3, Need: 3}, func(_ context.Context, i int) (int64, bool, error) {
		switch i {
		case 0:
			return 7, true, nil
		case 1:
			return 9, false, nil // a no carries no value
		}
		return 5, true, errors.New("failed") // nor does a failed call
	})
	r.WaitAll()
	want := []int64{7, 0, 0}
	for i := range want {
		if v := r.Answer(i); v.Value != want[i] { // every answer, on time or late
			t.Fatalf("node %d: value %d, want %d", i, v.Value, want[i])
		}
	}
}

func TestWorkersReuseAndClose(t *testing.T) {
	base := runtime.NumGoroutine()
	var w Workers
	var wg sync.WaitGroup
	for i := 0; i < 200; i++ {
		wg.Add(1)
		w.Go(wg.Done)
	}
	wg.Wait()
	// Parked workers take the next calls: 100 calls one after another
	// leave no more goroutines than there were.
	parked := runtime.NumGoroutine()
	for i := 0; i < 100; i++ {
		done := make(chan struct{})
		w.Go(func() { close(done) })
		<-done
	}
	if n := runtime.NumGoroutine(); n > parked {
		t.Fatalf("%d goroutines after 100 calls, %d before: parked workers not reused", n, parked)
	}
	w.mu.Lock()
	idle := len(w.idle)
	w.mu.Unlock()
	if idle > maxIdle {
		t.Fatalf("%d workers parked, at most %d", idle, maxIdle)
	}
	w.Close()
	waitGoroutines(t, base)
	ran := make(chan struct{})
	w.Go(func() { close(ran) }) // after Close: on a goroutine of its own
	<-ran
	waitGoroutines(t, base)
}

// waitGoroutines waits until at most n goroutines run.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, want at most %d", runtime.NumGoroutine(), n)
		}
		time.Sleep(time.Millisecond)
	}
}
