package redlock

import (
	"testing"
	"time"

	"github.com/redlock-go/redlock/clock"
	"github.com/redlock-go/redlock/internal/quorum"
)

func TestRunEnds(t *testing.T) {
	const n, d = 16, 5 * time.Millisecond
	for _, tc := range []struct {
		name     string
		passes   int
		age      time.Duration
		seen     bool
		end, ask bool
	}{
		{"fresh, seen", 0, 0, true, false, false},
		{"short, seen", 3, d - 1, true, false, false},
		{"at d, seen", 3, d, true, true, false},
		{"count, seen", n, 0, true, true, false},
		{"short, alone", 3, d - 1, false, false, false},
		{"at d, alone: ask", 3, d, false, false, true},
		{"long, alone: ask", 3, soloRuns*d - 1, false, false, true},
		{"solo cap", 3, soloRuns * d, false, true, true},
		{"count, alone", n, 0, false, true, false},
		{"hand-off off", 0, 0, false, true, false},
	} {
		nn := n
		if tc.name == "hand-off off" {
			nn = LocalHandoffOff
		}
		end, ask := runEnds(tc.passes, nn, tc.age, d, tc.seen)
		if end != tc.end || ask != tc.ask {
			t.Errorf("%s: runEnds(%d, %d, %v, %v, %v) = %v, %v; want %v, %v", tc.name, tc.passes, nn, tc.age, d, tc.seen, end, ask, tc.end, tc.ask)
		}
	}
}

// runClient is a Client on a fake clock, with runs of at most 10 ms
// while another process is seen and 100 passes; its nodes do not answer.
func runClient(t *testing.T) (*Client, *clock.Fake) {
	t.Helper()
	fake := clock.NewFake(time.Unix(1e9, 0))
	c, err := New(unreachable(3), WithClock(fake), WithLocalHandoff(100, 10*time.Millisecond),
		WithRestartQuarantine(QuarantineOff))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, fake
}

func runLock(c *Client) *Lock {
	return &Lock{c: c, keys: []string{"k"}, name: "k", typ: plain{}, acquired: c.o.clock.Now()}
}

// A run is timed from the acquisition on the nodes, across passes.
func TestRunAgeSpansPasses(t *testing.T) {
	c, fake := runClient(t)
	l := runLock(c)
	fake.Advance(3 * time.Millisecond)
	l.mu.Lock()
	next := l.successor()
	l.mu.Unlock()
	fake.Advance(4 * time.Millisecond)
	if got := next.runAge(); got != 7*time.Millisecond {
		t.Fatalf("run age after a pass = %v, want 7ms", got)
	}
	if next.passes != 1 {
		t.Fatalf("passes = %d", next.passes)
	}
}

// A race lost after a release notification shows another process: the run
// then ends after WithLocalHandoff's run; a win starts over.
func TestRunEndsAfterLostRace(t *testing.T) {
	c, fake := runClient(t)
	c.raced("k", false, false, nil) // on the timer: maybe our own hold
	if c.rivalSeen("k") {
		t.Fatal("a lost attempt on the backoff timer counts as a rival")
	}
	c.raced("k", false, true, nil)
	if !c.rivalSeen("k") {
		t.Fatal("a lost race after a notification does not count")
	}
	l := runLock(c)
	fake.Advance(9 * time.Millisecond)
	if c.runOver(l) {
		t.Fatal("run over before WithLocalHandoff's run")
	}
	fake.Advance(time.Millisecond)
	if !c.runOver(l) {
		t.Fatal("run goes on past WithLocalHandoff's run with a rival seen")
	}
	c.raced("k", true, true, []quorum.Vote{{OK: true}, {OK: true}})
	if c.rivalSeen("k") {
		t.Fatal("a win does not start over")
	}
}

// Alone, a run goes on past WithLocalHandoff's run and asks a node whether
// another process waits; a node that cannot tell (here: none answers)
// counts as a yes, and the run then ends.
func TestRunAsksWhenAlone(t *testing.T) {
	c, fake := runClient(t)
	tu := c.hub.EnterWant("k", nil) // a local waiter: this Client subscribes
	defer tu.Leave()
	l := runLock(c)
	fake.Advance(10 * time.Millisecond)
	if c.runOver(l) {
		t.Fatal("run over at WithLocalHandoff's run with no rival seen")
	}
	guard := time.Now().Add(time.Minute)
	for !c.rivalSeen("k") {
		if time.Now().After(guard) {
			t.Fatal("no answer counted")
		}
		time.Sleep(time.Millisecond)
	}
	if !c.runOver(l) {
		t.Fatal("run goes on after a node could not tell")
	}
}

// Alone and not asked again, a run ends at soloRuns times
// WithLocalHandoff's run, and at WithLocalHandoff passes in any case.
func TestRunSoloAndCountCaps(t *testing.T) {
	c, fake := runClient(t)
	l := runLock(c) // no local waiter: nothing is asked
	fake.Advance(soloRuns*10*time.Millisecond - time.Millisecond)
	if c.runOver(l) {
		t.Fatal("run over before the solo cap")
	}
	fake.Advance(time.Millisecond)
	if !c.runOver(l) {
		t.Fatal("run goes on past the solo cap")
	}
	l2 := runLock(c)
	l2.passes = 100
	if !c.runOver(l2) {
		t.Fatal("run goes on past WithLocalHandoff passes")
	}
}
