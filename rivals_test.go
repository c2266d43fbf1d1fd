package redlock

import (
	"testing"
	"time"

	"github.com/redlock-go/redlock/clock"
	"github.com/redlock-go/redlock/internal/quorum"
)

// A head that polls on its backoff timer and finds the key held may have
// found this Client's own hold: that is no race lost, and the Client
// gives way to nobody; a race lost after a release notification is.
func TestPollDoesNotGiveWay(t *testing.T) {
	c, err := New(unreachable(3), WithRestartQuarantine(QuarantineOff))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	yes := quorum.Vote{OK: true, Latency: time.Millisecond}
	c.raced("k", true, true, []quorum.Vote{yes, yes, yes}) // a won round sets the unit
	c.raced("k", false, false, nil)
	if y := c.raceDelay("k"); y != 0 {
		t.Fatalf("after a lost poll: gives way %v, want 0", y)
	}
	c.raced("k", false, true, nil)
	if y := c.raceDelay("k"); y != time.Duration(rivalWait(1))*time.Millisecond {
		t.Fatalf("after a lost race: gives way %v, want %d round trips of 1ms", y, rivalWait(1))
	}
}

// On a key where a foreign (go-redsync) value was found, runs end as if
// another process waited, and after a run ends on the nodes the head waits
// about one go-redsync retry interval before it tries again; three such
// waits in a row that no one used stop them, a refused attempt starts
// them again; after a foreign turn longer than foreignSlow the next run
// may last as long (at most foreignSlow) and ends without a wait.
func TestForeignKeyTakesTurns(t *testing.T) {
	fake := clock.NewFake(time.Unix(1000, 0))
	c, err := New(unreachable(3), WithRestartQuarantine(QuarantineOff), WithClock(fake))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.rivalSeen("k") {
		t.Fatal("a key no foreign value was found under counts as wanted by another process")
	}
	c.foreign.seen.Store(true)
	c.foreign.foundOn("k", fake.Now())
	if !c.rivalSeen("k") || c.rivalSeen("other") {
		t.Fatal("only the key a foreign value was found under counts as wanted by another process")
	}
	yes := quorum.Vote{OK: true, Latency: time.Millisecond}
	votes := []quorum.Vote{yes, yes, yes}
	for i := range foreignIdle {
		c.yieldForeign("k")
		if y := c.raceDelay("k"); y < foreignYield/2 || y > foreignYield {
			t.Fatalf("wait %d after a run: %v, want within [%v, %v]", i, y, foreignYield/2, foreignYield)
		}
		c.raced("k", true, false, votes) // the head took it back: no one came
		if d := c.runOwed("k"); d != 0 {
			t.Fatalf("after a wait no one used: the next run may last %v, want no more than usual", d)
		}
	}
	c.yieldForeign("k")
	if y := c.raceDelay("k"); y != 0 {
		t.Fatalf("after %d unused waits: waits %v, want 0", foreignIdle, y)
	}
	c.raced("k", false, false, nil) // someone holds it
	c.yieldForeign("k")
	if y := c.raceDelay("k"); y == 0 {
		t.Fatal("after a refused attempt: no wait, want one")
	}
	fake.Advance(3 * time.Second) // the foreign side kept the key 3 s
	c.raced("k", true, false, votes)
	if d := c.runOwed("k"); d != foreignSlow {
		t.Fatalf("after a 3 s foreign turn: the next run may last %v, want %v", d, foreignSlow)
	}
	c.yieldForeign("k")
	if y := c.raceDelay("k"); y != 0 || c.runOwed("k") != 0 {
		t.Fatalf("the run after a long foreign turn: waits %v (want 0), owed %v (want 0)", y, c.runOwed("k"))
	}
}
