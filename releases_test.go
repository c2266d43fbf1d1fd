package redlock

import (
	"context"
	"testing"
	"time"
)

// An acquisition waits for the releases of its key on its node that were
// registered before it started, not for later ones (its own lock's
// Release waits for the acquisition's answer: waiting on it would
// deadlock until the node deadline), and not for other nodes or keys.
func TestReleasesOrderAcquisitions(t *testing.T) {
	var r releases
	ctx := context.Background()
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := r.wait(ctx, 0, []string{"k"}, r.mark()); err != nil {
		t.Fatal("waited with nothing registered")
	}
	q1 := r.next()
	r.add(0, []string{"k"}, q1)
	mark := r.mark()
	q2 := r.next() // registered after the acquisition started
	r.add(0, []string{"k"}, q2)
	if err := r.wait(short, 0, []string{"k"}, mark); err == nil {
		t.Fatal("did not wait for an earlier release of the key on the node")
	}
	if err := r.wait(ctx, 1, []string{"k"}, mark); err != nil {
		t.Fatal("waited for another node's release")
	}
	if err := r.wait(ctx, 0, []string{"other"}, mark); err != nil {
		t.Fatal("waited for another key's release")
	}
	woke := make(chan error)
	go func() { woke <- r.wait(ctx, 0, []string{"x", "k"}, mark) }()
	r.done(0, []string{"k"}, q1)
	if err := <-woke; err != nil {
		t.Fatalf("waited on a release registered later: %v", err)
	}
	r.done(0, []string{"k"}, q2)
	if len(r.m) != 0 || r.n.Load() != 0 {
		t.Fatalf("records left: %v, %d", r.m, r.n.Load())
	}
}

func TestSeqsOutOfOrder(t *testing.T) {
	s := seqs{}
	for _, q := range []uint64{5, 7, 9} {
		if s.first == 0 {
			s.first = q
		} else {
			s.rest = append(s.rest, q)
		}
	}
	s = s.without(7)
	if !s.anyUpTo(5) || s.anyUpTo(4) {
		t.Fatalf("%+v", s)
	}
	s = s.without(5)
	if s.anyUpTo(8) || !s.anyUpTo(9) {
		t.Fatalf("%+v", s)
	}
	if s = s.without(9); s.first != 0 || len(s.rest) != 0 {
		t.Fatalf("%+v", s)
	}
}
