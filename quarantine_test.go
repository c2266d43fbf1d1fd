package redlock

import (
	"errors"
	"testing"
	"time"

	"github.com/redlock-go/redlock/clock"
	"github.com/redlock-go/redlock/node"
)

func TestQuarantineArithmetic(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	window := 10 * time.Second
	q := newQuarantine(clk, []string{"a", "b"}, func() time.Duration { return window }, false)
	if u := q.learn(0, node.Identity{RunID: "r1", Uptime: time.Second}); !u.IsZero() {
		t.Fatalf("fresh node quarantined by default until %v", u)
	}
	if err := q.discount(0); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	start := clk.Now()
	u := q.learn(0, node.Identity{RunID: "r2", Uptime: 3 * time.Second}) // restarted 3 s ago
	if want := start.Add(7 * time.Second); !u.Equal(want) {
		t.Fatalf("until %v, want %v", u, want)
	}
	var qe *QuarantineError
	if err := q.discount(0); !errors.Is(err, ErrNodeQuarantined) || !errors.As(err, &qe) || qe.Addr != "a" {
		t.Fatalf("discount: %v", err)
	}
	if s := q.snapshot(); s.Started != 1 || s.Now != 1 {
		t.Fatalf("stats during the quarantine: %+v", s)
	}
	var ended []int
	q.onEnd = func(i int) { ended = append(ended, i) }
	clk.Advance(7*time.Second - time.Nanosecond)
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
	// A durable node that restarted lost nothing: not quarantined.
	if u := q.learn(0, node.Identity{RunID: "r3", AOF: true, FsyncAlways: true}); !u.IsZero() {
		t.Errorf("durable node quarantined until %v", u)
	}
	// A new run_id up for longer than the window is another server at the
	// address (fail-over): it never saw our writes, one full window out.
	now := clk.Now()
	if u := q.learn(0, node.Identity{RunID: "r4", Uptime: time.Hour, AOF: true, FsyncAlways: true}); !u.Equal(now.Add(window)) {
		t.Errorf("fail-over: until %v, want %v", u, now.Add(window))
	}
	// A fresh Client meeting an old node: nothing to suspect.
	q2 := newQuarantine(clk, []string{"a"}, func() time.Duration { return window }, true)
	if u := q2.learn(0, node.Identity{RunID: "r1", Uptime: window}); !u.IsZero() {
		t.Errorf("strict mode: node up one window quarantined until %v", u)
	}
	window = 0 // off
	if u := q.learn(0, node.Identity{RunID: "r5"}); !u.IsZero() {
		t.Errorf("quarantine off, still until %v", u)
	}
}

func TestQuarantineFreshAndSameServer(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	q := newQuarantine(clk, []string{"a", "b", "c"}, func() time.Duration { return 5 * time.Second }, true)
	if u := q.learn(0, node.Identity{RunID: "r1", Uptime: time.Second}); !u.Equal(clk.Now().Add(4 * time.Second)) {
		t.Errorf("strict mode: fresh node until %v", u)
	}
	q.learn(1, node.Identity{RunID: "x", Uptime: time.Hour})
	q.learn(2, node.Identity{RunID: "x", Uptime: time.Hour})
	var se *SameServerError
	if err := q.discount(2); !errors.Is(err, ErrSameServer) || !errors.As(err, &se) || se.Addr != "c" || se.Other != "b" {
		t.Errorf("alias: %v", err)
	}
	if err := q.discount(1); err != nil {
		t.Errorf("first address discounted: %v", err)
	}
}
