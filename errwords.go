package redlock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/observe"
)

// nodeWords says in a short clause, in the caller's terms, why a node's
// vote is missing: err is a NodeResult's Err or Discounted. The full error
// stays in the NodeResult.
func nodeWords(err error) string {
	if errors.Is(err, observe.ErrPending) {
		return "not waited for (the round was decided)"
	}
	if e, ok := asNotSent(err); ok {
		return notAskedWords(e)
	}
	if node.NotSent(err) {
		return "not asked: its connection was still busy at the deadline"
	}
	var nd *node.NotDurableError
	if errors.As(err, &nd) {
		return "vote not confirmed on disk (" + notDurableWords(nd) + ")"
	}
	var pe *node.ProcessError
	if errors.As(err, &pe) && pe.Evicted {
		return "evicted keys since it was trusted: not counted yet"
	}
	if errors.As(err, &pe) {
		return "restarted (another server process answers): not counted yet"
	}
	var ra *node.RegisterACLError
	if errors.As(err, &ra) {
		return cut(ra.Err.Error(), replyMost) + " (the lock's keys or the TTL register's, " + node.TTLRegisterKey + " and " + node.AOFStampKey + ": the ACL needs them all)"
	}
	for _, w := range sentinelWords {
		if errors.Is(err, w.err) {
			return w.words
		}
	}
	return transportWords(err)
}

// sentinelWords are the per-node reasons a vote did not count, in words.
var sentinelWords = [...]struct {
	err   error
	words string
}{
	{observe.ErrNodeQuarantined, "restarted recently: quarantined"},
	{observe.ErrSameServer, "same server as another node"},
	{observe.ErrClockDrift, "clock outside the drift budget"},
	{observe.ErrFenceNotRaised, "lock expired there before its fence was raised"},
	{errDiscounted, "vote not counted"},
}

// notAskedWords is the clause of a call whose command was not sent.
func notAskedWords(e *notSentError) string {
	w := "not asked"
	if e.why != "" {
		w += ": " + e.why
	}
	switch {
	case e.err == nil:
		return w
	case e.why == "":
		return w + ": " + nodeWords(e.err)
	}
	return w + " (" + nodeWords(e.err) + ")"
}

// notDurableWords says why WAITAOF did not confirm a vote.
func notDurableWords(nd *node.NotDurableError) string {
	var re redis.Error
	switch {
	case nd.Err == nil:
		return fmt.Sprintf("not fsynced within %v", nd.Timeout)
	case errors.As(nd.Err, &re):
		return cut(re.Error(), replyMost)
	}
	return "no answer to WAITAOF: " + transportWords(nd.Err)
}

// replyMost is how much of a node's error reply a clause keeps: enough
// for the reply to say what was refused (an ACL's NOPERM names it).
const replyMost = 80

// transportWords says what a node call's own error was: the node's error
// reply, a timeout, a refused or dropped connection, else the error's
// text, cut short.
func transportWords(err error) string {
	var re redis.Error
	var dns *net.DNSError
	switch {
	case errors.As(err, &re):
		return cut(re.Error(), replyMost)
	case node.IsTimeout(err):
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection dropped"
	case errors.As(err, &dns):
		return "host not found"
	case errors.Is(err, redis.ErrClosed):
		return "connection closed"
	}
	return cut(trimPrefixes(err.Error()), 60)
}

// unreachableErr reports whether err says the node could not be reached at
// all: a refused, dropped or closed connection, an unknown host (not a
// timeout: a slow node is reached, late).
func unreachableErr(err error) bool {
	var dns *net.DNSError
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &dns) || errors.Is(err, redis.ErrClosed)
}

// notCountedErr reports whether err keeps a node's vote out because it
// could not count: quarantined, the same server as another node, a clock
// outside the drift budget.
func notCountedErr(err error) bool {
	return errors.Is(err, observe.ErrNodeQuarantined) || errors.Is(err, observe.ErrSameServer) || errors.Is(err, observe.ErrClockDrift)
}

// causeWords says in plain words what ended a failed call: ctx's error,
// or the cause the call found (a type clash, nodes that refuse it, Close).
func causeWords(err error) string {
	var ie *incurableError
	if errors.As(err, &ie) {
		return fmt.Sprintf("%d of %d nodes refuse the call, no retry helps", ie.refused, ie.nodes)
	}
	return cut(trimPrefixes(err.Error()), 120)
}

// trimPrefixes drops the package prefixes of an error's text, which the
// QuorumError's own message already starts with.
func trimPrefixes(s string) string {
	for _, p := range []string{"redlock: ", "redlock/node: ", "node: "} {
		s = strings.TrimPrefix(s, p)
	}
	return s
}

// cut cuts s to most bytes, at a rune boundary, marking the cut.
func cut(s string, most int) string {
	if len(s) <= most {
		return s
	}
	i := most - len("...")
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i] + "..."
}

// briefKeys quotes keys for a QuorumError's first line: at most two, each
// cut to 40 bytes, and how many there are when there are more.
func briefKeys(keys []string) string {
	return listKeys(keys, 2, func(k string) string {
		if len(k) > 40 {
			return fmt.Sprintf("%q...", k[:40])
		}
		return fmt.Sprintf("%q", k)
	})
}

// incurableError is the cause of an acquisition that ends at once because
// so many nodes refuse it in a way the same command meets again (see
// Client.incurable) that the others cannot make a quorum.
type incurableError struct {
	refused, nodes int
	first          error // the first such refusal
}

func (e *incurableError) Error() string {
	return fmt.Sprintf("redlock: %d of %d nodes refuse the call in a way no retry changes: %v", e.refused, e.nodes, e.first)
}

func (e *incurableError) Unwrap() error { return e.first }
