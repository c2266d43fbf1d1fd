// Package transport is the seam between the lock library and a Redis
// client: the few operations the lock needs from a connection to one node.
// The library's own go-redis support is one implementation; adapters for
// other clients live in their own modules (rueidisconn, valkeyconn) and
// anyone may write another.
//
// Replies are plain Go values: int64 (integer), string (simple or bulk
// string), []any (array, set), map[string]any (RESP3 map), float64
// (RESP3 double), bool (RESP3 boolean) and nil (nil reply). Errors fall in
// four classes the lock tells apart: the server's error reply (the command
// was rejected before it ran: IsErrorReply), a timeout (IsTimeout), an
// error before anything was written (the command cannot have run:
// ErrNotSent), and any other transport error (the command may have run).
package transport

import (
	"context"
	"time"
)

// Conn is a connection, or a pool of connections, to one Redis server
// (standalone, or a Sentinel-managed master). It must be safe for
// concurrent use. Every call returns by ctx's deadline when the Conn
// honors deadlines (see DeadlineHonorer); the lock enforces it otherwise.
type Conn interface {
	// Do sends one command (args[0] is its name) and returns its reply.
	// A nil reply is (nil, nil). A rejected command returns an error that
	// IsErrorReply accepts.
	Do(ctx context.Context, args ...any) (any, error)

	// Pipeline sends cmds in order on one connection, all written before
	// any reply is read, and sets replies[i] (len(replies) == len(cmds))
	// to cmds[i]'s own reply: an error reply to one command never stands
	// for another's. A transport error is set on every command it may have
	// cut short. Commands after the first on the same connection rely on
	// it: WAITAOF confirms the writes of its own connection.
	Pipeline(ctx context.Context, cmds [][]any, replies []Reply)

	// Subscribe returns a new pub/sub subscription to the server, with no
	// channel subscribed; it sends nothing before the first call on it.
	// A Conn that cannot subscribe returns ErrNoPubSub.
	Subscribe(ctx context.Context) (Subscription, error)

	// Addr names the server, host:port (or unix:path), for errors, logs
	// and the check that no server casts two votes.
	Addr() string
}

// Reply is one command's reply in a Pipeline: its value, or its error.
type Reply struct {
	Val any
	Err error
}

// Subscription is one pub/sub connection. It reconnects on its own after
// a failed read or write and then subscribes every channel it was asked
// for. Receive is called by one goroutine; Subscribe, Unsubscribe and
// Close may be called from another.
type Subscription interface {
	// Subscribe sends SUBSCRIBE for channels. Its confirmation, or the
	// server's refusal, arrives through Receive.
	Subscribe(ctx context.Context, channels ...string) error
	// Unsubscribe sends UNSUBSCRIBE for channels.
	Unsubscribe(ctx context.Context, channels ...string) error
	// Receive returns the next event, waiting at most timeout for it (a
	// timeout error after that, see IsTimeout); ctx bounds a reconnection.
	// An error reply to a command sent on the subscription (a refused
	// SUBSCRIBE or PING) is returned as an error IsErrorReply accepts.
	Receive(ctx context.Context, timeout time.Duration) (Event, error)
	// Ping checks that the connection still answers; the PONG arrives
	// through Receive.
	Ping(ctx context.Context) error
	// Close closes the connection; a blocked Receive returns an error.
	Close() error
}

// Event is what a Subscription receives.
type Event struct {
	Kind    EventKind
	Channel string // Message, Subscribed, Unsubscribed
	Payload string // Message
}

// EventKind tells the events of a Subscription apart.
type EventKind int

const (
	Message      EventKind = iota + 1 // a message published on Channel
	Subscribed                        // SUBSCRIBE to Channel confirmed
	Unsubscribed                      // UNSUBSCRIBE of Channel confirmed
	Pong                              // the answer to Ping
)

// DeadlineHonorer is implemented by a Conn that reports whether it bounds
// its socket reads and writes by ctx's deadline. A Conn that does not
// implement it is assumed not to: the lock then returns by the deadline
// itself and lets the command end in the background.
type DeadlineHonorer interface {
	HonorsDeadlines() bool
}

// Retrier is implemented by a Conn that reports whether it may send a
// command again after a transport error. A Conn that does not implement it
// is assumed to: the lock then treats every failed call as one that may
// have run, and acquires with a script that finds its own earlier write.
type Retrier interface {
	MayRetry() bool
}

// DialNotifier is implemented by a Conn that can report its new
// connections: a new connection may reach a server that restarted, whose
// identity the lock then reads again. Without it, a restart is still
// caught by the grant script's process guard, one refused vote later.
type DialNotifier interface {
	// OnDial makes the Conn call f after each connection it opens.
	OnDial(f func())
}
