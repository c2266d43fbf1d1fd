package redlock

import (
	"context"
	"fmt"

	"github.com/redlock-go/redlock/internal/handoff"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/observe"
)

// ReadLock makes the call a reader of a read-write lock: readers hold the
// key together, each with its own lease (a dead reader's share expires on
// its own), and no writer holds it meanwhile. Writers are not starved: a
// refused writer keeps new readers out for 4 times its maximum retry
// backoff (WithRetryBackoff: 400ms by default), renewed by each of its
// attempts and kept on the nodes after the last reader left, so the
// readers inside drain and the writer gets in. One key per call.
func ReadLock() LockOption { return kindOption(reader{}) }

// WriteLock makes the call the writer of a read-write lock: it holds the
// key alone, with no reader or other writer (see ReadLock). A reader
// cannot become a writer: a WriteLock whose ctx carries this Client's
// read Lock of the key fails with ErrHeldByCaller rather than deadlock.
func WriteLock() LockOption { return kindOption(writer{}) }

// typed is what the hash-backed types (reentrant, read-write) share: one
// key, a round that meets another type's key is refused at once, and each
// entry has its own owner value on the nodes, so none is handed on.
type typed struct{ plain }

func (typed) refused(out quorum.Outcome) error {
	for _, v := range out.Votes {
		if node.IsWrongType(v.Err) {
			return fmt.Errorf("%w: %v", ErrWrongType, v.Err)
		}
	}
	return nil
}

// reader is a read-write lock's reader (rw_lock.lua): shared with other
// readers.
type reader struct{ typed }

func (reader) is() traits { return traits{kind: observe.KindRead, tryFirst: true, shared: true} }

func (reader) command(_ *Client, r *request, keys []string, owner string) (cmd, again *node.Cmd) {
	cmd = node.ReadLock(keys[0], owner, r.ttl)
	return cmd, cmd
}

// queue enters the reader as a shared waiter: once a reader of this Client
// gets in, the readers queued behind it try together, up to the first
// writer, which keeps its place.
func (reader) queue(_ context.Context, w *wait) (*handoff.Turn, func(*Lock), error) {
	c, q := w.c, w.key
	return c.hub.EnterShared(q, *w.r), func(*Lock) { c.leftRace(q) }, nil
}

// writer is a read-write lock's writer (rw_lock.lua): refused, it sets
// its intent, which keeps new readers out.
type writer struct{ typed }

func (writer) is() traits { return traits{kind: observe.KindWrite, tryFirst: true} }

// queue enters a writer that was refused before it queued ahead of the
// local readers queued after the last writer: its intent keeps them out
// on the nodes until it got in, so they could only wait for it, and it
// behind them.
func (writer) queue(_ context.Context, w *wait) (*handoff.Turn, func(*Lock), error) {
	c, q := w.c, w.key
	if w.tried {
		return c.hub.EnterAhead(q, *w.r), func(*Lock) { c.leftRace(q) }, nil
	}
	return c.hub.EnterWant(q, *w.r), func(*Lock) { c.leftRace(q) }, nil
}

func (writer) command(_ *Client, r *request, keys []string, owner string) (cmd, again *node.Cmd) {
	cmd = node.WriteLock(keys[0], owner, r.ttl, 4*r.o.retryMax)
	return cmd, cmd
}

// leftover clears the intent the writer's attempt left on the nodes that
// refused it (readers still held the key there): it got in on a quorum
// and has left, so readers must not wait out that intent.
func (writer) leftover(l *Lock) *node.Cmd { return node.ClearIntent(l.keys[0], l.owner) }
