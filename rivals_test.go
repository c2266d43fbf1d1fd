package redlock

import (
	"testing"
	"time"

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
	c.raced("k", plain{}, true, true, []quorum.Vote{yes, yes, yes}) // a won round sets the unit
	c.raced("k", plain{}, false, false, nil)
	if y := c.raceDelay("k", plain{}); y != 0 {
		t.Fatalf("after a lost poll: gives way %v, want 0", y)
	}
	c.raced("k", plain{}, false, true, nil)
	if y := c.raceDelay("k", plain{}); y != time.Duration(rivalWait(1))*time.Millisecond {
		t.Fatalf("after a lost race: gives way %v, want %d round trips of 1ms", y, rivalWait(1))
	}
}
