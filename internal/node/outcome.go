package node

import (
	"errors"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/transport"
)

// MayHaveRun reports whether a call that failed with err may still have
// run on the node, so that whatever it writes must be undone. It is false
// only where the error proves the command was not executed:
//
//   - the node answered with an error reply (WRONGPASS, NOAUTH, NOPERM,
//     MOVED, READONLY, OOM, BUSY, LOADING, ...): Redis rejects a command
//     before it runs, and the lock scripts check before they write;
//   - no connection was made: the dial was refused or timed out, the name
//     did not resolve, the pool had no connection, the client was closed;
//   - the peer does not speak RESP (its reply cannot be parsed: an HTTP
//     server or another protocol on the port), so no lock exists there;
//   - the call was never written: its deadline passed while it waited in
//     the node's queue (see Node.Coalesce; NotSent).
//
// A vote the node did not confirm on its disk (ErrNotDurable) may have run.
//
// Timeouts, resets and EOF after the command was written, and every error
// not listed above, may have run. A node whose client may send a command
// again (see Node.Retries) reports only the last try's error, and an
// earlier try may have run: on such nodes every failed call may have run.
func (n *Node) MayHaveRun(err error) bool {
	if err == nil || NotSent(err) {
		return false
	}
	if errors.Is(err, ErrNotDurable) {
		return true // the command ran; only its confirmation failed
	}
	return n.retries || mayHaveRun(err)
}

func mayHaveRun(err error) bool {
	if transport.IsErrorReply(err) {
		return false // an error reply: the command was rejected
	}
	if errors.Is(err, transport.ErrNotSent) || errors.Is(err, redis.ErrClosed) || errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrPoolExhausted) {
		return false // no connection was taken
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false // refused, unreachable or timed out while connecting
	}
	return !notRESP(err)
}

// notRESP reports a reply that go-redis could not parse: the peer is not a
// Redis server. (go-redis reports these as plain errors, so the text is
// all there is to go on.)
func notRESP(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "redis: can't parse") || strings.HasPrefix(s, "redis: invalid reply")
}

// incurablePrefixes begin the error replies that the same command will
// get again however often it is sent: a missing permission or login, an
// unknown command, a script command the ACL refuses.
var incurablePrefixes = []string{"NOPERM", "WRONGPASS", "NOAUTH", "ERR unknown command", "ERR The user executing the script can't run"}

// Incurable reports whether err is a refusal that no retry of the same
// command can change (see incurablePrefixes): a node's ACL or version, not
// its state. A vote the node could not confirm because it refused WAITAOF
// is one; a timeout, OOM, LOADING, BUSY or MISCONF is not.
func Incurable(err error) bool {
	var nd *NotDurableError
	if errors.As(err, &nd) {
		err = nd.Err
	}
	msg, ok := errorReply(err)
	if !ok {
		return false
	}
	for _, p := range incurablePrefixes {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// errorReply returns the text of the server's error reply err is or
// wraps, if it is one.
func errorReply(err error) (string, bool) {
	var re interface {
		error
		RedisError()
	}
	if err == nil || !errors.As(err, &re) {
		return "", false
	}
	return re.Error(), true
}
