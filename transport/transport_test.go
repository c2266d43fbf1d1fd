package transport

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
)

func TestErrorClasses(t *testing.T) {
	reply := fmt.Errorf("node 1: %w", ErrorReply("NOPERM no permission"))
	if !IsErrorReply(reply) || IsTimeout(reply) || errors.Is(reply, ErrNotSent) {
		t.Errorf("error reply misread: %v", reply)
	}
	dial := NotSent(errors.New("dial tcp: connection refused"))
	if !errors.Is(dial, ErrNotSent) || IsErrorReply(dial) || dial.Error() != "dial tcp: connection refused" {
		t.Errorf("not sent misread: %v", dial)
	}
	if NotSent(nil) != nil {
		t.Error("NotSent(nil) is not nil")
	}
	for _, err := range []error{context.DeadlineExceeded, fmt.Errorf("read: %w", os.ErrDeadlineExceeded), NotSent(context.DeadlineExceeded)} {
		if !IsTimeout(err) {
			t.Errorf("%v: not a timeout", err)
		}
	}
	if IsTimeout(context.Canceled) || IsErrorReply(nil) || IsTimeout(nil) {
		t.Error("cancel, nil misread")
	}
}
