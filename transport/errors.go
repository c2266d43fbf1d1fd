package transport

import (
	"context"
	"errors"
)

// ErrorReply is the server's error reply (ERR, WRONGTYPE, NOSCRIPT,
// NOPERM, ...): the server rejected the command before it ran. Adapters
// return it, or any error with a RedisError method (go-redis marks its
// error replies so, and they pass through as they are).
type ErrorReply string

func (e ErrorReply) Error() string { return string(e) }

// RedisError marks e as a server's error reply.
func (ErrorReply) RedisError() {}

// IsErrorReply reports whether err is, or wraps, the server's error
// reply: the command was rejected and did not run.
func IsErrorReply(err error) bool {
	var m interface{ RedisError() }
	return err != nil && errors.As(err, &m)
}

// ErrNotSent matches a transport error raised before the command was
// written (no connection, the client closed): the command cannot have run.
// Adapters wrap such errors with NotSent.
var ErrNotSent = errors.New("transport: command not sent")

// NotSent wraps err, an error raised before the command was written, so
// that it matches ErrNotSent (and still err).
func NotSent(err error) error {
	if err == nil {
		return nil
	}
	return &notSent{err}
}

type notSent struct{ err error }

func (e *notSent) Error() string        { return e.err.Error() }
func (e *notSent) Unwrap() error        { return e.err }
func (e *notSent) Is(target error) bool { return target == ErrNotSent }

// IsTimeout reports whether err is a deadline or socket timeout: it
// matches context.DeadlineExceeded or has a Timeout method that says so.
func IsTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// ErrNoPubSub is Conn.Subscribe's error on a Conn that cannot subscribe
// (a cluster client: channels there would need one subscription per shard).
var ErrNoPubSub = errors.New("transport: no pub/sub on this connection")
