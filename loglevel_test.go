package redlock

import (
	"context"
	"errors"
	"log/slog"
	"syscall"
	"testing"

	"github.com/redlock-go/redlock/observe"
)

// A key held by someone else is a normal outcome, not a warning: a
// TryLock refused by the holder logs at Debug, a Lock that waited its ctx
// out behind a holder at Info; not obtained for want of answering nodes,
// a lost lock and a failed release stay at Warn.
func TestLogLevels(t *testing.T) {
	no := observe.NodeResult{Addr: "a:1"}
	yes := observe.NodeResult{Addr: "b:1", Vote: true}
	down := observe.NodeResult{Addr: "c:1", Err: syscall.ECONNREFUSED}
	refused := func(cause error, nodes ...observe.NodeResult) error {
		return &QuorumError{Op: observe.OpAcquire, Keys: []string{"k"}, Need: 2, Nodes: nodes, Err: ErrNotObtained, Cause: cause}
	}
	for _, tc := range []struct {
		name string
		o    outcome
		want slog.Level
	}{
		{"TryLock refused by the holder", outcome{op: opAcquire, attempts: 1, err: refused(nil, no, no, yes)}, slog.LevelDebug},
		{"Lock whose ctx ended behind a holder", outcome{op: opAcquire, attempts: 9, err: refused(context.DeadlineExceeded, no, no, no)}, slog.LevelInfo},
		{"held on one node, two down", outcome{op: opAcquire, attempts: 1, err: refused(nil, no, down, down)}, slog.LevelWarn},
		{"a type clash", outcome{op: opAcquire, attempts: 1, err: refused(ErrWrongType, no, no, no)}, slog.LevelWarn},
		{"too few nodes answer", outcome{op: opAcquire, attempts: 3, err: refused(context.DeadlineExceeded, yes, down, down)}, slog.LevelWarn},
		{"lost", outcome{op: opLost, err: ErrLockLost}, slog.LevelWarn},
		{"release not confirmed", outcome{op: opRelease, err: ErrNotHeld}, slog.LevelWarn},
		{"internal error", outcome{op: opLost, err: errors.Join(ErrInternal, ErrLockLost)}, slog.LevelError},
		{"acquired", outcome{op: opAcquire}, slog.LevelDebug},
	} {
		if got, msg := tc.o.level(); got != tc.want {
			t.Errorf("%s: logged at %v (%q), want %v", tc.name, got, msg, tc.want)
		}
	}
}
