package redlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/observe"
)

// mixedNodes is a round of five nodes: refused, timed out, not asked
// because the TTL register could not be written, not answered yet, yes.
func mixedNodes(addr func(i int) string) []observe.NodeResult {
	tcp := func(i int) *net.TCPAddr { return &net.TCPAddr{IP: net.IPv4(10, 0, 0, byte(i)), Port: 6379} }
	refused := &net.OpError{Op: "dial", Net: "tcp", Addr: tcp(1), Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	timeout := &net.OpError{Op: "read", Net: "tcp", Source: tcp(9), Addr: tcp(2), Err: os.ErrDeadlineExceeded}
	register := gated(addr(2), "TTL register (redlock:ttl) not written, so the vote would be in no register",
		"its TTL register (redlock:ttl) not written", context.DeadlineExceeded)
	return []observe.NodeResult{
		{Addr: addr(0), Err: refused},
		{Addr: addr(1), Err: timeout},
		{Addr: addr(2), Err: register},
		{Addr: addr(3), Err: observe.ErrPending},
		{Addr: addr(4), Vote: true, Latency: 1234 * time.Microsecond},
	}
}

// A QuorumError's message leads with the summary, stays short, names every
// node whose call failed in the caller's words, and leaves the full
// detail to its fields.
func TestQuorumErrorMessage(t *testing.T) {
	addr := func(i int) string { return fmt.Sprintf("10.0.0.%d:6379", i+1) }
	qe := &QuorumError{Op: observe.OpAcquire, Keys: []string{"orders:42"}, Need: 3, Got: 1, Attempts: 1, Err: ErrNotObtained, Nodes: mixedNodes(addr)}
	msg := qe.Error()
	t.Logf("%d bytes: %s", len(msg), msg)
	if want := `redlock: lock not obtained: acquire ["orders:42"]: got 1 of 3 needed: 1 of 5 nodes unreachable, 2 timed out, 1 not waited for;`; !strings.HasPrefix(msg, want) {
		t.Errorf("message does not start with the summary %q", want)
	}
	if len(msg) > quorumMsgMax {
		t.Errorf("message of %d bytes, want at most %d", len(msg), quorumMsgMax)
	}
	for i, want := range []string{"connection refused", "timed out", "not asked: its TTL register (redlock:ttl) not written (timed out)", "not waited for (the round was decided)"} {
		if c := addr(i) + ": " + want; !strings.Contains(msg, c) {
			t.Errorf("message lacks %q", c)
		}
	}
	for _, internal := range []string{"no answer before", "not sent to node", "dial tcp", "read tcp", "so the vote would be", addr(4)} {
		if strings.Contains(msg, internal) {
			t.Errorf("message has %q", internal)
		}
	}
	var got *QuorumError
	if err := fmt.Errorf("wrapped: %w", qe); !errors.As(err, &got) || !errors.Is(got.Nodes[0].Err, syscall.ECONNREFUSED) || !got.Nodes[1].Timeout() ||
		!strings.Contains(got.Nodes[2].Err.Error(), "so the vote would be in no register") || !errors.Is(got.Nodes[3].Err, observe.ErrPending) {
		t.Errorf("the per-node detail is not in the fields: %+v", got)
	}
}

// Nodes with the same failure share a clause; what does not fit under the
// cap is counted, not cut mid-clause.
func TestQuorumErrorCap(t *testing.T) {
	long := func(i int) string {
		return fmt.Sprintf("redis-node-%d.a-rather-long-internal-domain.example.com:6379", i)
	}
	qe := &QuorumError{Op: observe.OpExtend, Keys: []string{strings.Repeat("k", 200), "b", "c"}, Need: 5, Attempts: 1, Err: ErrNotExtended}
	for i := 0; i < 9; i++ {
		qe.Nodes = append(qe.Nodes, observe.NodeResult{Addr: long(i), Err: fmt.Errorf("node %d: %w", i, os.ErrDeadlineExceeded)})
	}
	qe.Nodes[8].Err = errors.New("something odd")
	msg := qe.Error()
	t.Logf("%d bytes: %s", len(msg), msg)
	if len(msg) > quorumMsgMax {
		t.Errorf("message of %d bytes, want at most %d", len(msg), quorumMsgMax)
	}
	if !strings.Contains(msg, "got 0 of 5 needed: 8 of 9 nodes timed out, 1 did not vote;") || !strings.Contains(msg, "... (3 keys)") {
		t.Errorf("summary missing")
	}
	if !strings.HasSuffix(msg, "more nodes") && !strings.HasSuffix(msg, "more node") {
		t.Errorf("no count of the nodes left out")
	}

	same := &QuorumError{Op: observe.OpAcquire, Keys: []string{"k"}, Need: 2, Err: ErrNotObtained}
	for i := 0; i < 3; i++ {
		same.Nodes = append(same.Nodes, observe.NodeResult{Addr: fmt.Sprintf("n%d:1", i), Err: os.ErrDeadlineExceeded})
	}
	if msg := same.Error(); !strings.HasSuffix(msg, "; n0:1, n1:1, n2:1: timed out") {
		t.Errorf("identical failures not grouped: %s", msg)
	}
}

// Each per-node reason reads as a short clause in the caller's terms.
func TestNodeWords(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{observe.ErrPending, "not waited for (the round was decided)"},
		{errNodeSkipped, "not asked: its last call timed out, a probe is in flight"},
		{errReleasePending, "not asked: our release there was still in flight"},
		{gated("a:1", "identity learned", "", &observe.QuarantineError{}), "not asked: restarted recently: quarantined"},
		{&node.NotDurableError{Timeout: time.Second}, "vote not confirmed on disk (not fsynced within 1s)"},
		{&node.ProcessError{Want: "a", Got: "b"}, "restarted (another server process answers): not counted yet"},
		{fmt.Errorf("x: %w", observe.ErrSameServer), "same server as another node"},
		{context.Canceled, "canceled"},
		{errors.New("redlock: " + strings.Repeat("long ", 30)), strings.Repeat("long ", 11) + "lo..."},
	}
	for _, tc := range cases {
		if got := nodeWords(tc.err); got != tc.want {
			t.Errorf("nodeWords(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
