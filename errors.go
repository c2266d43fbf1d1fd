package redlock

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/observe"
)

// Sentinel errors. Every error the package returns matches one of them with
// errors.Is; most also carry per-node detail in a *QuorumError.
var (
	// ErrNotObtained: the lock was not acquired (held by someone else,
	// too few nodes answered, or the validity ran out during the attempt).
	ErrNotObtained = errors.New("redlock: lock not obtained")
	// ErrLockLost: the lock is no longer held: its validity ran out, or a
	// quorum of nodes no longer holds our owner value.
	ErrLockLost = errors.New("redlock: lock lost")
	// ErrNotExtended: an extension did not reach a quorum because nodes
	// failed or timed out; the lock stays valid until its deadline.
	ErrNotExtended = errors.New("redlock: lock not extended")
	// ErrNotHeld: Release could not confirm on a quorum that it deleted
	// our lock (it expired or was taken over, nodes failed, or it was
	// released before).
	ErrNotHeld = errors.New("redlock: lock not held")
	// ErrInvalidArgument: bad input, refused before any network traffic.
	ErrInvalidArgument = errors.New("redlock: invalid argument")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("redlock: client closed")
	// ErrWrongType: a typed Lock call met a key that a node holds as
	// another type of lock, or as data that is not a lock. Nothing was
	// written; the call is not retried. A plain call never returns it: to
	// a plain lock any existing key is held.
	ErrWrongType = errors.New("redlock: key holds another type of lock")
	// ErrHeldByCaller: the call's ctx carries a Lock of this Client on
	// the same key (WithLock, Run) and waiting would deadlock on it: a
	// second Lock without Reentrant on both, a write lock asked by a
	// reader (upgrade), or a permit of a semaphore of one. Refused before
	// any traffic.
	ErrHeldByCaller = errors.New("redlock: key is held by the caller")
	// ErrMaxHold: an extension or renewal would keep the lock past
	// WithMaxHold. It matches ErrNotExtended; the cause of a watchdog lock
	// that ran out there matches it too.
	ErrMaxHold error = &maxHoldError{}
	// ErrReleased is the cause of a Lock's end (context.Cause of its
	// Context) after Release.
	ErrReleased = errors.New("redlock: lock released")
	// ErrInternal: this package caught a bug of its own. The Lock it hit
	// ended as lost (the error also matches ErrLockLost) and the error
	// was logged; the process and the Client's other locks go on. Its
	// message names the Lock's keys, its phase and the event its phase
	// table does not list.
	ErrInternal = errors.New("redlock: internal error")
)

// errNodeSkipped is observe.ErrNodeSkipped as a not-sent call's error.
var errNodeSkipped error = &notSentError{msg: observe.ErrNodeSkipped.Error(),
	why: "its last call timed out, a probe is in flight", is: observe.ErrNodeSkipped}

// phaseError is the cause of a Lock ended because an event came in a
// phase of its life that the package's phase table does not pair with it
// (a bug of this package). It matches ErrInternal and ErrLockLost.
type phaseError struct {
	Keys  []string // the Lock's keys
	Phase string   // the Lock's phase: "held", "extending", "releasing" (each also with "-unsure"), "released", "passed", "lost" or "lost-released"
	Event string   // the event: "extend", "confirm", "doubt", "skip", "release", "end", "lose" or "pass"
}

func (e *phaseError) Error() string {
	return fmt.Sprintf("redlock: internal error: lock %s in phase %s has no transition on %s: lock lost",
		quoteKeys(e.Keys), e.Phase, e.Event)
}

// Unwrap returns ErrInternal and ErrLockLost.
func (e *phaseError) Unwrap() []error { return []error{ErrInternal, ErrLockLost} }

type maxHoldError struct{}

func (*maxHoldError) Error() string        { return "redlock: max hold reached" }
func (*maxHoldError) Is(target error) bool { return target == ErrNotExtended }

func isMaxHold(err error) bool { return errors.Is(err, ErrMaxHold) }

// errDiscounted is a discounted vote's reason when its gate cleared
// before the error was built.
var errDiscounted = errors.New("redlock: vote not counted")

// QuorumError reports a round that did not reach its quorum, with what every
// node answered. errors.Is matches its sentinel (Err) and, when ctx ended the
// call, ctx's error.
type QuorumError struct {
	Op       observe.Op           // observe.OpAcquire, OpExtend, OpRenew or OpRelease
	Keys     []string             // the lock's keys
	Need     int                  // votes needed
	Got      int                  // counted yes votes in the last round
	Attempts int                  // rounds made
	Validity time.Duration        // validity left when the quorum was reached too late (acquire), else 0
	Nodes    []observe.NodeResult // the last round, in node order
	Err      error                // the sentinel: ErrNotObtained, ErrLockLost, ErrNotExtended or ErrNotHeld
	Cause    error                // ctx's error when ctx ended the call, else nil
}

// Error leads with what the caller needs: the sentinel, the operation,
// the keys, the votes got and needed and why in plain words; then one
// short clause per node whose call failed (nodes with the same failure
// share one), in node order but for nodes that had not answered yet, which
// come last. Plain yes and no answers are only counted.
// The message stays within quorumMsgMax bytes, naming the nodes that no
// longer fit as "... and N more nodes"; Nodes has every answer in full.
func (e *QuorumError) Error() string {
	var b strings.Builder
	b.WriteString(e.Err.Error())
	fmt.Fprintf(&b, ": %s %s: got %d of %d needed", e.Op, briefKeys(e.Keys), e.Got, e.Need)
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " after %d attempts", e.Attempts)
	}
	if why := e.why(); len(why) > 0 {
		b.WriteString(": ")
		b.WriteString(strings.Join(why, ", "))
	}
	writeClauses(&b, e.clauses())
	return b.String()
}

// quorumMsgMax bounds the length of a QuorumError's message (but for a
// header that is longer by itself).
const quorumMsgMax = 360

// why says in plain words why the round failed: ctx's error or the cause
// that ended the call, a quorum reached too late, and a tally of the nodes
// by what kept their vote out: held elsewhere (a no), unreachable,
// timed out, failed otherwise, not counted (quarantined, same server,
// clock drift) and not waited for (the round was decided first).
func (e *QuorumError) why() []string {
	var why []string
	if e.Cause != nil {
		why = append(why, causeWords(e.Cause))
	}
	if e.Got >= e.Need && e.Op == observe.OpAcquire {
		why = append(why, fmt.Sprintf("quorum reached but the validity ran out (%v left)", e.Validity))
	}
	t := tallyNodes(e.Nodes)
	if t.no > 0 {
		why = append(why, fmt.Sprintf("%s on %s", noWords(e.Op), count(t.no, len(e.Nodes))))
	}
	var ie *incurableError
	if errors.As(e.Cause, &ie) {
		t.unreachable, t.slow, t.failed = 0, 0, 0 // the cause counts them
	}
	// The first count names the nodes ("2 of 5 nodes"), the others follow
	// it as bare numbers.
	first := true
	for _, k := range []struct {
		n     int
		words string
	}{{t.unreachable, "unreachable"}, {t.slow, "timed out"}, {t.failed, "did not vote"}, {t.notCounted, "not counted"},
		{t.discounted, "said yes but not counted"}, {t.notAwaited, "not waited for"}} {
		switch {
		case k.n == 0:
		case first:
			why, first = append(why, count(k.n, len(e.Nodes))+" "+k.words), false
		default:
			why = append(why, fmt.Sprintf("%d %s", k.n, k.words))
		}
	}
	return why
}

// nodeTally counts a round's nodes by what became of their vote.
type nodeTally struct {
	no          int // a plain no (held elsewhere, not ours)
	unreachable int // connection refused, dropped or closed, host not found (also what kept a command from being sent)
	slow        int // timed out (likewise)
	failed      int // any other error (an error reply, not asked for another reason)
	discounted  int // a yes not counted
	notCounted  int // not asked or not waited for, and its vote would not have counted
	notAwaited  int // not waited for: the round was decided first
}

func tallyNodes(nodes []observe.NodeResult) nodeTally {
	var t nodeTally
	for _, n := range nodes {
		switch {
		case n.Vote && n.Discounted != nil:
			t.discounted++
		case errors.Is(n.Err, observe.ErrPending) && n.Discounted != nil:
			t.notCounted++
		case errors.Is(n.Err, observe.ErrPending):
			t.notAwaited++
		case notCountedErr(n.Err):
			t.notCounted++ // not asked: its vote could not count
		case n.Err != nil && unreachableErr(n.Err):
			t.unreachable++
		case n.Err != nil && node.IsTimeout(n.Err):
			t.slow++
		case n.Err != nil:
			t.failed++
		case !n.Vote:
			t.no++
		}
	}
	return t
}

// count is "k of n nodes" ("1 node" when n is 1).
func count(k, n int) string {
	if n == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d of %d nodes", k, n)
}

// noWords is what a node's no means for op.
func noWords(op observe.Op) string {
	switch op {
	case observe.OpAcquire:
		return "held elsewhere"
	case observe.OpRelease:
		return "not ours (expired or taken over)"
	}
	return "no longer ours"
}

// clause is the failure shared by the nodes at addrs.
type clause struct {
	addrs   []string
	words   string
	pending bool // the nodes had not answered yet: said last
}

// clauses returns one clause per distinct failure of a node (an error, or
// a yes not counted), in the order of the first node that had it.
func (e *QuorumError) clauses() []clause {
	var out []clause
	at := map[string]int{}
	for _, n := range e.Nodes {
		var w string
		pending := errors.Is(n.Err, observe.ErrPending)
		switch {
		case pending && n.Discounted != nil:
			w, pending = nodeWords(n.Discounted), false // not counted in any case: that is what to say
		case n.Err != nil:
			w = nodeWords(n.Err)
		case n.Vote && n.Discounted != nil:
			w = "yes, not counted: " + nodeWords(n.Discounted)
		default:
			continue
		}
		if i, ok := at[w]; ok {
			out[i].addrs = append(out[i].addrs, n.Addr)
			continue
		}
		at[w] = len(out)
		out = append(out, clause{addrs: []string{n.Addr}, words: w, pending: pending})
	}
	sort.SliceStable(out, func(i, j int) bool { return !out[i].pending && out[j].pending }) // the failures first
	return out
}

// writeClauses appends cs to b ("; addr, addr: words") while the message
// stays within quorumMsgMax, leaving room to say how many nodes did not
// fit: a clause that does not fit whole names the nodes that fit and
// counts the others ("; a, b and 3 more: words").
func writeClauses(b *strings.Builder, cs []clause) {
	const tail = len("; ... and 99 more nodes")
	for i, c := range cs {
		room := quorumMsgMax - b.Len()
		if i < len(cs)-1 {
			room -= tail
		}
		s := fitClause(c, room)
		if s == "" && i == 0 { // name one node at least, its reason cut short
			s = "; " + c.addrs[0]
			if len(c.addrs) > 1 {
				s += fmt.Sprintf(" and %d more", len(c.addrs)-1)
			}
			s += ": "
			s += cut(c.words, max(room-len(s), 16))
		}
		if s == "" {
			left := 0
			for _, c := range cs[i:] {
				left += len(c.addrs)
			}
			fmt.Fprintf(b, "; ... and %d more %s", left, plural(left, "node", "nodes"))
			return
		}
		b.WriteString(s)
	}
}

// fitClause renders c within room bytes, naming as many of its nodes as
// fit (at least one), or returns "" if not even one does.
func fitClause(c clause, room int) string {
	for k := len(c.addrs); k > 0; k-- {
		s := "; " + strings.Join(c.addrs[:k], ", ")
		if k < len(c.addrs) {
			s += fmt.Sprintf(" and %d more", len(c.addrs)-k)
		}
		if s += ": " + c.words; len(s) <= room {
			return s
		}
	}
	return ""
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Unwrap returns the sentinel and, if set, ctx's error.
func (e *QuorumError) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Err, e.Cause}
	}
	return []error{e.Err}
}

func invalid(format string, args ...interface{}) error {
	return fmt.Errorf("%w: "+format, append([]interface{}{ErrInvalidArgument}, args...)...)
}

// shortKey quotes k for a message, cut to its first 64 bytes.
func shortKey(k string) string {
	const most = 64
	if len(k) <= most {
		return fmt.Sprintf("%q", k)
	}
	return fmt.Sprintf("%q... (%d bytes)", k[:most], len(k))
}

// quoteKeys quotes keys for a message: each cut to 64 bytes (shortKey), at
// most 8 of them, so that a message stays short whatever the input.
func quoteKeys(keys []string) string { return listKeys(keys, 8, shortKey) }

// listKeys writes at most most of keys, each as one shows it, in brackets,
// and how many there are when there are more.
func listKeys(keys []string, most int, one func(string) string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, k := range keys {
		if i == most {
			fmt.Fprintf(&b, " ... (%d keys)", len(keys))
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(one(k))
	}
	b.WriteByte(']')
	return b.String()
}
