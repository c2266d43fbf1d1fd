package node

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redlock-go/redlock/observe"
	"github.com/redlock-go/redlock/transport"
)

// Durable votes: on a node with Durable(true), every command that may
// grant or lengthen a lock (a Cmd built with grants set, and ExtendMany)
// is followed, in the same pipeline and so on the same connection, by
// WAITAOF 1 0 t. WAITAOF returns once this connection's writes are in the
// node's append-only file and fsynced (or t has passed), and the AOF is
// written in order, so a confirmation covers the command and every write
// the node ran before it. A yes stands only when the node confirms it;
// otherwise the call fails with a *NotDurableError, and the command may
// have run (MayHaveRun): its lock is undone like any vote of unknown
// outcome. WAITAOF needs Redis 7.2 or Valkey 8.0 and appendonly yes.

// ErrNotDurable matches a vote the node did not confirm on its disk.
var ErrNotDurable = observe.ErrNotDurable

// NotDurableError is the error of a command that ran, or may have run, on
// a node that did not confirm it on its disk: the node refused WAITAOF
// (Err: its error reply, e.g. an unknown command before Redis 7.2,
// appendonly off, or NOPERM from an ACL without +waitaof), its answer did not arrive before the node's deadline
// (Err: the connection's error), or it reported no local fsync within
// Timeout (Err nil). It matches ErrNotDurable; it does not unwrap to Err,
// whose error reply would otherwise say that the command was rejected.
type NotDurableError struct {
	Timeout time.Duration // WAITAOF's timeout
	Err     error
}

func (e *NotDurableError) Error() string {
	msg, reply := errorReply(e.Err)
	switch {
	case e.Err == nil:
		return fmt.Sprintf("%s: not fsynced within %v (under appendfsync everysec a node fsyncs for WAITAOF about every 1/hz s: raise hz, or the node timeout)", ErrNotDurable.Error(), e.Timeout)
	case reply && strings.HasPrefix(msg, "NOPERM"):
		return fmt.Sprintf("%s: WAITAOF refused by the node's ACL (the user needs +waitaof, as the lock's ACL line in docs/deployment.md says for durable votes): %v", ErrNotDurable.Error(), e.Err)
	case reply:
		return fmt.Sprintf("%s: WAITAOF refused (it needs Redis 7.2+ or Valkey 8.0+ with appendonly yes): %v", ErrNotDurable.Error(), e.Err)
	}
	return fmt.Sprintf("%s: no answer to WAITAOF (timeout %v) before the node's deadline (a node answers a WAITAOF that timed out about every 1/hz s: raise hz, or the node timeout): %v", ErrNotDurable.Error(), e.Timeout, e.Err)
}

// Is makes a *NotDurableError match ErrNotDurable.
func (e *NotDurableError) Is(target error) bool { return target == ErrNotDurable }

// Durable turns durable votes on or off for n (see above). Call it before
// n is used.
func (n *Node) Durable(on bool) { n.aof = on }

// noDeadlineWait is WAITAOF's timeout for a call without a deadline
// (WAITAOF 0 would wait for ever).
const noDeadlineWait = time.Second

// waitMargin is the least time WAITAOF leaves of the node's deadline for
// the node's own answer ("not fsynced") to arrive: a reply that misses the
// deadline is lost, and so is the connection, which go-redis then drops.
const waitMargin = 5 * time.Millisecond

// waitAOF returns the WAITAOF command that confirms the writes before it
// on its connection, and its timeout: the time left before ctx's deadline
// less a margin of the larger of waitMargin and a fifth of that time (at
// least 1 ms).
func waitAOF(ctx context.Context) ([]interface{}, time.Duration) {
	t := noDeadlineWait
	if d, ok := ctx.Deadline(); ok {
		left := time.Until(d)
		t = left - max(waitMargin, left/5)
	}
	t = max(t.Truncate(time.Millisecond), time.Millisecond)
	return []interface{}{"waitaof", 1, 0, t.Milliseconds()}, t
}

// confirmed reads a WAITAOF reply: nil when the node fsynced, else the
// *NotDurableError that says why not.
func confirmed(w transport.Reply, t time.Duration) error {
	if w.Err != nil {
		return &NotDurableError{Timeout: t, Err: w.Err}
	}
	v, err := toInts(w.Val)
	switch {
	case err != nil:
		return &NotDurableError{Timeout: t, Err: err}
	case len(v) < 1 || v[0] < 1:
		return &NotDurableError{Timeout: t}
	}
	return nil
}

// pair sends args and a WAITAOF behind it in one pipeline, sets r to its
// reply and returns WAITAOF's verdict (see confirmedPipeline).
func (n *Node) pair(ctx context.Context, args []interface{}, r *transport.Reply) error {
	rs := make([]transport.Reply, 1)
	err := n.confirmedPipeline(ctx, [][]interface{}{args}, rs)
	*r = rs[0]
	return err
}

// confirmedPipeline sends cmds and one WAITAOF behind them in one
// pipeline, sets replies (len(cmds)) to their own replies and returns
// WAITAOF's verdict, which covers them all.
func (n *Node) confirmedPipeline(ctx context.Context, cmds [][]interface{}, replies []transport.Reply) error {
	w, t := waitAOF(ctx)
	all := append(cmds[:len(cmds):len(cmds)], w)
	rs := make([]transport.Reply, len(all))
	n.conn.Pipeline(ctx, all, rs)
	copy(replies, rs)
	return confirmed(rs[len(cmds)], t)
}
