package node

import (
	"strconv"
	"testing"
	"time"
)

// The guard raises a register entry that outlives, on the Client's clock
// (a node clock up to the drift factor fast), every lock of its TTL bucket
// by a second, and keeps it that long past the lock for min(TTL, 10 s) more
// (one raise covers the locks of about that long).
func TestGuardArgsEntryOutlivesTheLock(t *testing.T) {
	const f = 0.01
	p := &boundProcess{arg: "run", evicted: "0", factor: f}
	for _, ttl := range []time.Duration{time.Millisecond, 437 * time.Millisecond, time.Minute, 23 * time.Hour} {
		args := p.guardArgs(ttl, true)
		b := TTLBucket(ttl)
		if args[2] != "d"+itoa(b.Milliseconds()) {
			t.Errorf("%v: field %v", ttl, args[2])
		}
		need := time.Duration(args[3].(int64)) * time.Millisecond
		hold := time.Duration(args[4].(int64)) * time.Millisecond
		onClient := func(d time.Duration) time.Duration { return time.Duration(float64(d) * (1 - f)) }
		if onClient(need) < b+time.Second {
			t.Errorf("%v: an entry left %v lives %v on the Client's clock, less than the lock and a second", ttl, need, onClient(need))
		}
		if onClient(hold) < b+min(b, registerSlack)+time.Second {
			t.Errorf("%v: a raise to %v lives %v on the Client's clock", ttl, hold, onClient(hold))
		}
		if again := p.guardArgs(ttl, true); &again[0] != &args[0] {
			t.Errorf("%v: arguments boxed again for the same TTL", ttl)
		}
	}
	if a := p.guardArgs(time.Second, false); a[2] != "1000" {
		t.Errorf("plain field %v", a[2])
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
