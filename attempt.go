package redlock

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
)

// maxNodes is how many nodes a Client takes: attempts track nodes in
// 64-bit sets.
const maxNodes = 64

// attempt is one acquisition round. Every attempt has its own owner value,
// so that its clean-up can never delete what a later attempt wrote; its
// round keeps every node's answer, late ones included, so that each node's
// clean-up (undo) or release (Lock.Release) goes out only after that node
// answered the attempt's own command and cannot overtake it.
type attempt struct {
	owner string
	round *quorum.Round
	start time.Time // when the round started: the validity counts from here
	token int64     // fencing token once the attempt won (WithFencing), else 0
}

// try sends one acquisition of r on keys to every node under a fresh
// owner value and returns the attempt with its round's outcome at the
// decision.
func (c *Client) try(ctx context.Context, r *request, keys []string) (attempt, quorum.Outcome, error) {
	owner, err := c.newOwner()
	if err != nil {
		return attempt{}, quorum.Outcome{}, err
	}
	ttl := r.ttl
	a := attempt{owner: owner}                     // returned by value: no allocation
	cmd, again := r.typ.command(c, r, keys, owner) // again: for nodes whose client may send it twice
	c.prepare(ctx, ttl)
	mark := c.rel.mark()
	a.start = c.o.clock.Now()
	a.round = c.round(ctx, opAcquire, ttl, c.need, func(ctx context.Context, i int) (int64, bool, error) {
		if err := c.rel.wait(ctx, i, keys, mark); err != nil {
			return 0, false, errReleasePending // not sent: nothing to undo
		}
		g, err := c.before(ctx, i, ttl)
		if err != nil {
			return 0, false, err
		}
		use := cmd
		if c.nodes[i].Retries() {
			use = again
		}
		v, ok, err := c.nodes[i].DoValue(ctx, use)
		ok, err = c.after(ctx, i, g, ok, err)
		return v, ok, err
	})
	return a, a.round.Wait(ctx), nil
}

// answers is what every node answered a winning attempt, for its
// Release: the attempt's round until every node has answered (Release
// then waits for a node's answer before sending there), and afterwards
// only the set of nodes that may hold the owner value, so that a held
// Lock does not keep the round, its commands and its contexts alive.
type answers struct {
	round atomic.Pointer[quorum.Round] // nil once every node answered
	may   atomic.Uint64                // nodes that may hold the value; final once round is nil

	c    *Client
	mu   sync.Mutex // guards acc and left, written by Heard
	acc  uint64
	left int
}

// watch returns the answers of the winning attempt a.
func (c *Client) watch(a *attempt) *answers {
	w := &answers{c: c, left: len(c.nodes)}
	w.round.Store(a.round)
	a.round.ThenTo(w) // w itself listens: no closure
	return w
}

// Heard takes node i's final answer v to the winning attempt (the round's
// Then callback).
func (w *answers) Heard(i int, v quorum.Vote, _ bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.c.mayHold(i, v) {
		w.acc |= 1 << i
	}
	if w.left--; w.left == 0 {
		w.may.Store(w.acc)
		w.round.Store(nil) // may is stored first: a reader that sees nil sees it
	}
}

// mayHold reports whether node i may hold the attempt's owner value,
// waiting for its answer if it has not come yet.
func (w *answers) mayHold(c *Client, i int) bool {
	if r := w.round.Load(); r != nil {
		return c.mayHold(i, r.Answer(i))
	}
	return w.may.Load()&(1<<i) != 0
}

// undo releases failed attempt a on every node that may hold its owner
// value: at once on the nodes that have answered, waiting for those calls
// so that the next attempt does not find a's keys in place; on every other
// node when its answer arrives, after it. Until then this Client's later
// acquisitions of the keys wait for each node's clean-up there (see
// releases), as they do for Release. It runs even if ctx is done: a failed
// attempt must not leave keys behind.
func (c *Client) undo(ctx context.Context, keys []string, ttl time.Duration, a *attempt) {
	q := c.rel.next()
	for i := range c.nodes {
		c.rel.add(i, keys, q)
	}
	rel := node.Release(keys, a.owner, false)
	var now uint64 // answered nodes that may hold a's value; written before Then returns
	a.round.Then(func(i int, v quorum.Vote, later bool) {
		switch {
		case !c.mayHold(i, v):
			c.rel.done(i, keys, q)
		case later:
			c.releaseLate(keys, ttl, i, q, rel)
		default:
			now |= 1 << i
		}
	})
	if now == 0 {
		return
	}
	c.roundWithin(ctx, opRelease, c.releaseTimeout(ttl), len(c.nodes), func(ctx context.Context, i int) (int64, bool, error) {
		if now&(1<<i) == 0 {
			return 0, false, errNotSent // cleared or released by Then's callback
		}
		return c.release(ctx, i, keys, q, rel)
	}).WaitAll()
}

// releaseLate releases an attempt on node i, whose answer came after its
// round was decided, on the goroutine that got the answer; q is the
// release's record (see releases).
func (c *Client) releaseLate(keys []string, ttl time.Duration, i int, q uint64, rel *node.Cmd) {
	ctx, cancel := context.WithTimeout(context.Background(), c.releaseTimeout(ttl))
	defer cancel()
	start := c.o.clock.Now()
	_, ok, err := c.release(ctx, i, keys, q, rel)
	c.observeNode(ctx, opRelease, i, quorum.Vote{OK: ok && err == nil, Err: err, Latency: c.o.clock.Now().Sub(start)})
}

// release sends rel to node i after c.rel.add(i, keys, q) and clears that
// record when the call returns; later acquisitions of the same keys on
// node i by this Client wait for it (see releases). Release calls are
// never skipped, so every record is cleared.
func (c *Client) release(ctx context.Context, i int, keys []string, q uint64, rel *node.Cmd) (int64, bool, error) {
	defer c.rel.done(i, keys, q)
	return c.nodes[i].DoValue(ctx, rel)
}

// newOwner returns a fresh owner value: the Client's instance id, a colon
// and 128 random bits (base64url), so that every attempt's value is unique
// and names the process that wrote it.
func (c *Client) newOwner() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("redlock: owner value: %w", err)
	}
	var v [22]byte // base64.RawURLEncoding.EncodedLen(16)
	base64.RawURLEncoding.Encode(v[:], b[:])
	return c.prefix + string(v[:]), nil // one allocation: the concatenation
}

// mayHold reports whether node i, which answered v, may hold an attempt's
// owner value: it said yes, or its call failed in a way that may have run
// the command (node.MayHaveRun: a timeout, a connection lost after the
// write). A plain no (the key was held by someone else), an error reply,
// a refused connection and a call that was never sent leave nothing there.
func (c *Client) mayHold(i int, v quorum.Vote) bool {
	return v.OK || v.Err != nil && (isDiscountedYes(v.Err) || !notSent(v.Err) && c.nodes[i].MayHaveRun(v.Err))
}

// isDiscountedYes reports whether err is a yes that did not count (see
// checkYes); apart from mayHold so that its target escapes only here.
func isDiscountedYes(err error) bool {
	var dy *discountedYes
	return errors.As(err, &dy)
}
