package observe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
)

func TestNodeResultTimeout(t *testing.T) {
	netTimeout := &net.OpError{Op: "read", Net: "tcp", Err: &timeoutErr{}}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("redlock: node refused"), false},
		{context.Canceled, false},
		{context.DeadlineExceeded, true},
		{fmt.Errorf("node a:1: %w", context.DeadlineExceeded), true},
		{netTimeout, true},
		{fmt.Errorf("wrapped: %w", netTimeout), true},
	} {
		if got := (NodeResult{Err: tc.err}).Timeout(); got != tc.want {
			t.Errorf("NodeResult{Err: %v}.Timeout() = %v, want %v", tc.err, got, tc.want)
		}
	}
}

type timeoutErr struct{}

func (*timeoutErr) Error() string { return "i/o timeout" }
func (*timeoutErr) Timeout() bool { return true }
