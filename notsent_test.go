package redlock

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/observe"
)

// Every call that sent no command is recognized by notSent; only those
// that did not reach the node at all also by untouched (health unknown,
// not observed). Each keeps its message and cause.
func TestNotSentErrors(t *testing.T) {
	g := gated("a:1", "identity (INFO) not learned within the node deadline", "its identity (INFO) not read", context.DeadlineExceeded)
	cases := []struct {
		err                error
		notSent, untouched bool
	}{
		{errNotSent, true, true},
		{errNodeSkipped, true, true},
		{errReleasePending, true, true},
		{fmt.Errorf("wrapped: %w", errNotSent), true, true},
		{g, true, false},
		{context.DeadlineExceeded, false, false},
		{errors.New("redlock: not sent"), false, false}, // the text alone is not the type
		{nil, false, false},
	}
	for _, tc := range cases {
		if notSent(tc.err) != tc.notSent || untouched(tc.err) != tc.untouched {
			t.Errorf("%v: notSent %v untouched %v, want %v %v", tc.err, notSent(tc.err), untouched(tc.err), tc.notSent, tc.untouched)
		}
	}
	if !errors.Is(g, context.DeadlineExceeded) || g.Error() != "redlock: not sent to node a:1: identity (INFO) not learned within the node deadline: context deadline exceeded" {
		t.Errorf("gated error %q lost its cause or message", g)
	}
	if !errors.Is(errNodeSkipped, observe.ErrNodeSkipped) || errors.Is(errNotSent, observe.ErrNodeSkipped) {
		t.Error("errNodeSkipped must match observe.ErrNodeSkipped only")
	}
	c, err := New(unreachable(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.mayHold(0, quorum.Vote{Err: g, Done: true}) {
		t.Error("a gated call cannot hold our value")
	}
}
