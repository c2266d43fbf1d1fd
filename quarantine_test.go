package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redlock-go/redlock/clock"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/observe"
)

func TestQuarantineArithmetic(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	window := 10 * time.Second
	q := newQuarantine(clk, []string{"a", "b"}, func() time.Duration { return window }, false)
	if u := learnNow(q, 0, node.Identity{RunID: "r1", Uptime: time.Second}); !u.IsZero() {
		t.Fatalf("fresh node quarantined by default until %v", u)
	}
	if err := q.discount(0); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	start := clk.Now()
	u := learnNow(q, 0, node.Identity{RunID: "r2", Uptime: 3 * time.Second}) // restarted 2-4 s ago (whole seconds)
	if want := start.Add(8 * time.Second); !u.Equal(want) {
		t.Fatalf("until %v, want %v", u, want)
	}
	var qe *observe.QuarantineError
	if err := q.discount(0); !errors.Is(err, observe.ErrNodeQuarantined) || !errors.As(err, &qe) || qe.Addr != "a" {
		t.Fatalf("discount: %v", err)
	}
	if s := q.snapshot(); s.Started != 1 || s.Now != 1 {
		t.Fatalf("stats during the quarantine: %+v", s)
	}
	var ended []int
	q.onEnd = func(i int) { ended = append(ended, i) }
	clk.Advance(8*time.Second - time.Nanosecond)
	if q.discount(0) == nil {
		t.Fatal("quarantine ended early")
	}
	clk.Advance(time.Nanosecond)
	if err := q.discount(0); err != nil {
		t.Fatalf("quarantine did not end: %v", err)
	}
	_ = q.discount(0)
	if s := q.snapshot(); s.Started != 1 || s.Now != 0 || len(ended) != 1 || ended[0] != 0 {
		t.Fatalf("after the quarantine: %+v, ended %v (want one end reported for node 0)", s, ended)
	}
	// A node restarted durable, after a process not seen durable, may
	// have lost its keys on the way: quarantined.
	now := clk.Now()
	if u := learnNow(q, 0, node.Identity{RunID: "r3", AOF: true, FsyncAlways: true}); !u.Equal(now.Add(window)) {
		t.Errorf("durable node after a non-durable one: until %v, want %v", u, now.Add(window))
	}
	clk.Advance(window)
	// Both processes configured durable, but nothing shows the new one
	// loaded the old one's file (a replacement with an empty disk):
	// quarantined.
	now = clk.Now()
	if u := learnNow(q, 0, node.Identity{RunID: "r3b", AOF: true, FsyncAlways: true}); !u.Equal(now.Add(window)) {
		t.Errorf("durable node without the old one's stamp: until %v, want %v", u, now.Add(window))
	}
	clk.Advance(window)
	_ = q.discount(0)
	// Both durable, and its data carries the old process's stamp: it lost
	// nothing, not quarantined.
	if v := q.learn(0, node.Identity{RunID: "r3c", AOF: true, FsyncAlways: true}, node.Register{AOFRun: "r3b"}); v.Suspect {
		t.Errorf("durable node that loaded the old one's file quarantined until %v", v.Until)
	}
	// A new run_id up for longer than the window is another server at the
	// address (fail-over): it never saw our writes, one full window out.
	now = clk.Now()
	if u := learnNow(q, 0, node.Identity{RunID: "r4", Uptime: time.Hour, AOF: true, FsyncAlways: true}); !u.Equal(now.Add(window)) {
		t.Errorf("fail-over: until %v, want %v", u, now.Add(window))
	}
	// A fresh Client meeting an old node: nothing to suspect.
	q2 := newQuarantine(clk, []string{"a"}, func() time.Duration { return window }, true)
	if u := learnNow(q2, 0, node.Identity{RunID: "r1", Uptime: window}); !u.IsZero() {
		t.Errorf("strict mode: node up one window quarantined until %v", u)
	}
	window = 0 // off
	if u := learnNow(q, 0, node.Identity{RunID: "r5"}); !u.IsZero() {
		t.Errorf("quarantine off, still until %v", u)
	}
}

// learnNow is learn for a node whose TTL registers read nothing: the
// quarantine's end (zero if none).
func learnNow(q *quarantine, i int, id node.Identity) time.Time {
	v := q.learn(i, id, node.Register{})
	if v.Suspect {
		q.resolve(i, v.Epoch, false, time.Time{}, 0, observe.BoundRegister)
	}
	return v.Until
}

// A node first met that started after the Client was created is a process
// it never saw: it may have restarted empty while locks were held, and is
// quarantined in the default mode too. One started before (or within
// INFO's one-second resolution of the creation) is trusted.
func TestQuarantineStartedAfterClient(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	window := 10 * time.Second
	q := newQuarantine(clk, []string{"a", "b", "c"}, func() time.Duration { return window }, false)
	clk.Advance(5 * time.Second)
	if u := learnNow(q, 0, node.Identity{RunID: "r0", Uptime: 2 * time.Second}); !u.Equal(clk.Now().Add(9 * time.Second)) {
		t.Errorf("node started 3 s after the Client: until %v, want %v", u, clk.Now().Add(9*time.Second))
	}
	var qe *observe.QuarantineError
	if err := q.discount(0); !errors.As(err, &qe) || qe.Reason != "started after this Client" {
		t.Errorf("discount: %v", err)
	}
	if u := learnNow(q, 1, node.Identity{RunID: "r1", Uptime: 4500 * time.Millisecond}); !u.IsZero() {
		t.Errorf("node started within a second of the Client quarantined until %v", u)
	}
	if u := learnNow(q, 2, node.Identity{RunID: "r2", Uptime: time.Hour}); !u.IsZero() {
		t.Errorf("node up long before the Client quarantined until %v", u)
	}
}

// The window covers other clients' locks: a restarted node stays out
// until the longest TTL the other nodes' registers carry has passed since
// its start, and does not count at all until the registers were read.
func TestQuarantineReadsTheRegisters(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	q := newQuarantine(clk, []string{"a", "b"}, func() time.Duration { return 3 * time.Second }, false)
	learnNow(q, 0, node.Identity{RunID: "r1", Uptime: time.Hour})
	clk.Advance(time.Minute)
	v := q.learn(0, node.Identity{RunID: "r2", Uptime: 2 * time.Second}, node.Register{}) // started 1-3 s ago
	if !v.Suspect || !v.Until.Equal(clk.Now().Add(2*time.Second)) {
		t.Fatalf("restart: %+v, want suspect, quarantined 2 s by its own window", v)
	}
	clk.Advance(time.Second)
	if err := q.discount(0); !errors.Is(err, observe.ErrNodeQuarantined) {
		t.Fatalf("registers not read yet, discount: %v", err)
	}
	want := clk.Now().Add(18 * time.Second)
	if u, _, _ := q.resolve(0, v.Epoch, false, time.Time{}, 20*time.Second, observe.BoundRegister); !u.Equal(want) {
		t.Fatalf("another client's 20 s TTL: until %v, want %v", u, want)
	}
	clk.Advance(18*time.Second - time.Nanosecond)
	if q.discount(0) == nil {
		t.Fatal("quarantine ended before the other client's TTL")
	}
	clk.Advance(time.Nanosecond)
	if err := q.discount(0); err != nil {
		t.Fatalf("quarantine did not end: %v", err)
	}
	if s := q.snapshot(); s.Started != 1 {
		t.Errorf("stats: %+v, want one quarantine begun", s)
	}
}

func TestQuarantineFreshAndSameServer(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	q := newQuarantine(clk, []string{"a", "b", "c"}, func() time.Duration { return 5 * time.Second }, true)
	if u := learnNow(q, 0, node.Identity{RunID: "r1", Uptime: 2 * time.Second}); !u.Equal(clk.Now().Add(4 * time.Second)) {
		t.Errorf("strict mode: fresh node until %v", u)
	}
	q.learn(1, node.Identity{RunID: "x", Uptime: time.Hour}, node.Register{})
	q.learn(2, node.Identity{RunID: "x", Uptime: time.Hour}, node.Register{})
	var se *observe.SameServerError
	if err := q.discount(2); !errors.Is(err, observe.ErrSameServer) || !errors.As(err, &se) || se.Addr != "c" || se.Other != "b" {
		t.Errorf("alias: %v", err)
	}
	if err := q.discount(1); err != nil {
		t.Errorf("first address discounted: %v", err)
	}
}

// A yes counts only if the gate still allows the node after the command:
// another goroutine may learn of a restart after the round read the gate
// at its start (the chaos scenario restart-no-persistence-quarantined
// found double grants when this was not checked), and a node whose
// identity is not known for its latest connection does not count at all.
func TestCheckYesRereadsTheGate(t *testing.T) {
	clk := clock.NewFake(time.Unix(1e9, 0))
	c, err := New(unreachable(3), WithClock(clk), WithRestartQuarantine(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	c.q.learn(0, node.Identity{RunID: "r1", Uptime: time.Hour}, node.Register{})
	c.ids.learned[0].Store(c.ids.gen[0].Load() + 1)
	g := c.gen(0)
	if ok, err := c.checkYes(ctx, 0, g, true, nil); !ok || err != nil {
		t.Fatalf("known node, no restart: %v %v", ok, err)
	}
	// Learned by another goroutine while the command was in flight.
	c.q.learn(0, node.Identity{RunID: "r2", Uptime: time.Second}, node.Register{})
	ok, err := c.checkYes(ctx, 0, g, true, nil)
	var dy *discountedYes
	if ok || !errors.As(err, &dy) || !errors.Is(err, observe.ErrNodeQuarantined) {
		t.Fatalf("yes from a node quarantined during the command: %v %v, want a discounted yes", ok, err)
	}
	// Stale (a connection dialed since it was identified), and it cannot
	// be identified now: its yes does not count, even though this command
	// did not dial.
	c.ids.learned[1].Store(0)
	ok, err = c.checkYes(ctx, 1, c.gen(1), true, nil)
	if ok || !errors.As(err, &dy) || !errors.Is(err, observe.ErrNodeQuarantined) {
		t.Fatalf("yes from a node of unknown identity: %v %v, want a discounted yes", ok, err)
	}
}

// A witness is a node whose process this Client knows and does not
// suspect: not a node under quarantine, nor a new run_id, nor one first
// met that started after the Client.
func TestQuarantineWitness(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	q := newQuarantine(clk, []string{"a", "b", "c"}, func() time.Duration { return 10 * time.Second }, false)
	old := node.Identity{RunID: "r0", Uptime: time.Hour}
	learnNow(q, 0, old)
	if !q.witness(0, old) {
		t.Error("known node not a witness")
	}
	if q.witness(0, node.Identity{RunID: "r0b", Uptime: time.Second}) {
		t.Error("a new run_id is a witness")
	}
	if !q.witness(1, node.Identity{RunID: "r1", Uptime: time.Hour}) {
		t.Error("node first met, up long before the Client: not a witness")
	}
	clk.Advance(time.Minute)
	if q.witness(1, node.Identity{RunID: "r1", Uptime: 30 * time.Second}) {
		t.Error("node first met, started after the Client: a witness")
	}
	v := q.learn(0, node.Identity{RunID: "r2", Uptime: time.Second}, node.Register{})
	if q.witness(0, node.Identity{RunID: "r2", Uptime: time.Second}) {
		t.Error("pending node is a witness")
	}
	q.resolve(0, v.Epoch, false, time.Time{}, 0, observe.BoundRegister)
	if q.witness(0, node.Identity{RunID: "r2", Uptime: time.Second}) {
		t.Error("quarantined node is a witness")
	}
	clk.Advance(10 * time.Second)
	if !q.witness(0, node.Identity{RunID: "r2", Uptime: 11 * time.Second}) {
		t.Error("node past its window not a witness")
	}
}

// A proof sets the window (bound register); a fallback may later be
// shortened by a proof, never a proof by a later fallback; an older
// epoch's resolution is dropped; QuarantineSettingFloor keeps the
// fallback.
func TestQuarantineResolveBounds(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	q := newQuarantine(clk, []string{"a", "b"}, func() time.Duration { return 45 * time.Second }, false)
	q.setting = 45 * time.Second
	learnNow(q, 0, node.Identity{RunID: "r1", Uptime: time.Hour})
	v := q.learn(0, node.Identity{RunID: "r2"}, node.Register{})
	now := clk.Now()
	u, bound, ok := q.resolve(0, v.Epoch, false, time.Time{}, 0, observe.BoundRegister)
	if !ok || bound != observe.BoundSetting || !u.Equal(now.Add(45*time.Second)) {
		t.Fatalf("fallback: %v %q %v", u, bound, ok)
	}
	var qe *observe.QuarantineError
	if err := q.discount(0); !errors.As(err, &qe) || qe.Bound != observe.BoundSetting {
		t.Fatalf("discount: %v", err)
	}
	clk.Advance(time.Second)
	u, bound, ok = q.resolve(0, v.Epoch, true, now.Add(400*time.Millisecond), 0, observe.BoundRegister)
	if !ok || bound != observe.BoundRegister || !u.Equal(clk.Now()) {
		t.Fatalf("proof after the fallback: %v %q %v", u, bound, ok)
	}
	if err := q.discount(0); err != nil {
		t.Fatalf("proven window over, discount: %v", err)
	}
	if _, _, ok := q.resolve(0, v.Epoch, false, time.Time{}, 0, observe.BoundRegister); ok {
		t.Fatal("a fallback replaced a proof")
	}
	v2 := q.learn(0, node.Identity{RunID: "r3"}, node.Register{})
	if _, _, ok := q.resolve(0, v.Epoch, true, clk.Now(), 0, observe.BoundRegister); ok {
		t.Fatal("an older epoch's proof was taken")
	}
	s := q.snapshot()
	if s.ByRegister != 1 || s.BySetting != 1 || !s.Nodes[0].Pending || s.Now != 1 {
		t.Fatalf("stats: %+v", s)
	}
	q.floor = true
	if u, bound, _ := q.resolve(0, v2.Epoch, true, clk.Now(), 0, observe.BoundRegister); bound != observe.BoundSetting || !u.Equal(clk.Now().Add(45*time.Second)) {
		t.Fatalf("floor mode: %v %q, want the setting", u, bound)
	}
	// This Client's own TTL longer than the setting labels the fallback.
	q.window = func() time.Duration { return time.Minute }
	v3 := q.learn(0, node.Identity{RunID: "r4"}, node.Register{})
	if _, bound, _ := q.resolve(0, v3.Epoch, false, time.Time{}, 0, observe.BoundRegister); bound != observe.BoundOwnTTL {
		t.Fatalf("own TTL fallback labelled %q", bound)
	}
}

func TestTTLBucket(t *testing.T) {
	for in, want := range map[time.Duration]time.Duration{
		400 * time.Millisecond: 400 * time.Millisecond, 437 * time.Millisecond: 437 * time.Millisecond, 12345 * time.Millisecond: 12400 * time.Millisecond,
		1500 * time.Microsecond: 2 * time.Millisecond, 23 * time.Hour: 23 * time.Hour, 99 * time.Millisecond: 99 * time.Millisecond,
		1001 * time.Millisecond: 1010 * time.Millisecond,
	} {
		if got := node.TTLBucket(in); got != want {
			t.Errorf("TTLBucket(%v) = %v, want %v", in, got, want)
		}
	}
}

// A restart kept its votes only when the new process runs appendonly and
// its register names the process this Client knew before.
func TestLearnKept(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	q := newQuarantine(clk, []string{"a"}, func() time.Duration { return time.Minute }, false)
	q.learn(0, node.Identity{RunID: "r1", Uptime: time.Hour, AOF: true}, node.Register{})
	for _, c := range []struct {
		id   node.Identity
		reg  node.Register
		kept bool
	}{
		{node.Identity{RunID: "r2", AOF: true}, node.Register{AOFRun: "r1"}, true},
		{node.Identity{RunID: "r3", AOF: true}, node.Register{AOFRun: "r3", AOFPrev: "r2"}, true},      // r3 stamped over r2's stamp
		{node.Identity{RunID: "r4", AOF: false}, node.Register{AOFRun: "r3"}, false},                   // appendonly off now
		{node.Identity{RunID: "r5", AOF: true}, node.Register{AOFRun: "r5", AOFPrev: "r3"}, false},     // loaded r3's, not r4's (which this Client saw)
		{node.Identity{RunID: "r6", AOF: true}, node.Register{}, false},                                // no stamp: the register is gone
		{node.Identity{RunID: "r7", AOF: true, Promoted: true}, node.Register{AOFRun: "r6"}, false},    // a promoted replica: the stamp came by replication
		{node.Identity{RunID: "r8", AOF: true, Uptime: time.Hour}, node.Register{AOFRun: "r7"}, false}, // up longer than the window: another server, not a restart
	} {
		v := q.learn(0, c.id, c.reg)
		if v.Kept != c.kept || !v.Suspect {
			t.Errorf("%s with register %+v: kept %v suspect %v, want kept %v, suspect", c.id.RunID, c.reg, v.Kept, v.Suspect, c.kept)
		}
		q.resolve(0, v.Epoch, true, clk.Now(), 0, observe.BoundRegister) // its window over: the next case is a restart of a trusted node
		clk.Advance(time.Millisecond)
	}
}

// TestQuarantineDiscountConcurrent: the gate's error for a quarantined
// node is read under the lock that learn and resolve change it under
// (under -race, discount read the node's window after unlocking).
func TestQuarantineDiscountConcurrent(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	q := newQuarantine(clk, []string{"a", "b"}, func() time.Duration { return 10 * time.Second }, false)
	learnNow(q, 0, node.Identity{RunID: "r0", Uptime: time.Hour})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for k := 0; k < 200; k++ {
			v := q.learn(0, node.Identity{RunID: "r" + string(rune('a'+k%26)) + string(rune('a'+k/26))}, node.Register{})
			q.resolve(0, v.Epoch, k%2 == 0, clk.Now().Add(time.Second), 0, observe.BoundRegister)
		}
	}()
	for {
		select {
		case <-done:
			return
		default:
			_ = q.discount(0)
		}
	}
}
