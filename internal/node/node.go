// Package node talks to one Redis node: it runs the lock, extend and release
// scripts there, each bounded by its context's deadline.
package node

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/goredisconn"
	"github.com/redlock-go/redlock/internal/handoff"
	"github.com/redlock-go/redlock/transport"
)

var (
	//go:embed lock.lua
	lockSrc string
	//go:embed extend.lua
	extendBody string
	//go:embed release.lua
	releaseBody string
	//go:embed lock_fenced.lua
	lockFencedSrc string
	//go:embed typed.lua
	typedLib string
	//go:embed reentrant_lock.lua
	reentrantBody string
	//go:embed rw_lock.lua
	rwBody string
	//go:embed rw_clear.lua
	rwClearBody string
	//go:embed fence_raise.lua
	fenceRaiseSrc string
	//go:embed release_plain.lua
	releasePlain string
	//go:embed extend_plain.lua
	extendPlain string
)

// Scripts that may meet a typed lock start with typed.lua's functions;
// release and extend handle one plain lock before defining them.
var (
	extendSrc    = extendPlain + typedLib + extendBody
	releaseSrc   = releasePlain + typedLib + releaseBody
	reentrantSrc = typedLib + reentrantBody
	rwSrc        = typedLib + rwBody
	rwClearSrc   = typedLib + rwClearBody
)

// The scripts' SHA1 digests for EVALSHA (Do falls back to EVAL when the
// node answers NOSCRIPT, after a restart or SCRIPT FLUSH).
var (
	releaseScript = newScript(releaseSrc)
	rwClearScript = newScript(rwClearSrc)
	raiseScript   = newScript(fenceRaiseSrc)
)

// script is a Lua script's SHA1 digest, for EVALSHA.
type script struct{ hash string }

func newScript(src string) *script {
	h := sha1.Sum([]byte(src))
	return &script{hash: hex.EncodeToString(h[:])}
}

// Hash returns the script's SHA1 digest in hex, as EVALSHA takes it.
func (s *script) Hash() string { return s.hash }

// The scripts that may grant or lengthen a lock, each with its guarded
// form (grant.go).
var (
	lockGrant      = grantOf(lockSrc)
	extendGrant    = grantOf(extendSrc)
	reentrantGrant = grantOf(reentrantSrc)
	rwGrant        = grantOf(rwSrc)
	fencedGrant    = grantOf(lockFencedSrc)
)

// Node is one Redis master. It is safe for concurrent use.
type Node struct {
	conn transport.Conn
	addr string
	// plain is set for a connection to one server, which may coalesce
	// (not a go-redis cluster or ring client).
	plain bool
	// deadlineGuard is set when the client ignores ctx deadlines
	// (ContextTimeoutEnabled false): the deadline is then enforced here,
	// and the command finishes in the background on the client's own
	// socket timeout.
	deadlineGuard bool
	// retries is set when the client may send a command again after a
	// network error (go-redis MaxRetries, cluster MaxRedirects).
	retries bool
	cluster bool
	track   Tracker
	// coalesce is set by Coalesce: concurrent calls share pipelines.
	coalesce bool
	co       coalescer
	// aof is set by Durable: commands that grant are confirmed on disk.
	aof bool
	// expect is the run_id of the process n's votes are bound to, changed
	// its watcher (see Bind).
	expect  atomic.Pointer[boundProcess]
	changed atomicFn
}

// Tracker counts commands in flight (a *sync.WaitGroup is one).
type Tracker interface {
	Add(delta int)
	Done()
}

// New wraps client. Every call returns by ctx's deadline, which the caller
// sets. track, if not nil, counts commands that outlive their deadline
// (clients that ignore ctx deadlines only).
func New(client redis.UniversalClient, track Tracker) *Node {
	c := goredisconn.New(client)
	n := NewConn(c, track)
	n.plain, n.cluster = c.Plain(), c.Cluster()
	return n
}

// NewConn is New for any transport: a connection to one server. It takes
// the transport's word on deadlines and retries (see
// transport.DeadlineHonorer and transport.Retrier); without it, it assumes
// the worse.
func NewConn(conn transport.Conn, track Tracker) *Node {
	n := &Node{conn: conn, addr: conn.Addr(), deadlineGuard: true, retries: true, track: track, plain: true}
	if h, ok := conn.(transport.DeadlineHonorer); ok {
		n.deadlineGuard = !h.HonorsDeadlines()
	}
	if r, ok := conn.(transport.Retrier); ok {
		n.retries = r.MayRetry()
	}
	return n
}

// Conn returns the node's transport.
func (n *Node) Conn() transport.Conn { return n.conn }

// Retries reports whether the node's client may send a command again after
// a network error. A SET NX sent twice that way finds its own first write
// and answers no: such a node needs Lock, not LockNew.
func (n *Node) Retries() bool { return n.retries }

// Addr returns the address this node reports in errors and logs.
func (n *Node) Addr() string { return n.addr }

// Cmd is one prepared node command: its arguments are boxed once and then
// shared, read-only, by the calls to every node (and every retry). Build it
// with Lock, LockNew, Extend or Release.
type Cmd struct {
	args   []interface{}  // as sent: EVALSHA sha numkeys keys... argv... or SET key value PX ms NX
	src    string         // the script's source, for EVAL after NOSCRIPT; "" for SET NX
	want   int64          // script reply that means yes; valued: any reply > 0
	valued bool           // the reply is a value (a fencing candidate), yes when > 0
	late   bool           // sent even after its caller left (releases: see Node.Coalesce)
	grants bool           // may grant or lengthen a lock: confirmed on disk on a Durable node
	g      *guardedScript // its guarded form, sent while the node is bound (see Bind); nil: never guarded
	ttl    time.Duration  // the TTL it may grant, which the guard makes sure the node's register covers
}

func scriptCmd(s *script, src string, keys []string, want int64, argv ...interface{}) *Cmd {
	args := make([]interface{}, 0, 3+len(keys)+len(argv))
	args = append(args, "evalsha", s.Hash(), len(keys))
	for _, k := range keys {
		args = append(args, k)
	}
	args = append(args, argv...)
	return &Cmd{args: args, src: src, want: want, grants: true}
}

// Lock sets keys to value with ttl if each is free or already holds value
// (then only its TTL is reset), all or nothing.
func Lock(keys []string, value string, ttl time.Duration) *Cmd {
	return lockGrant.cmd(keys, 1, ttl, value, ttl.Milliseconds())
}

// LockNew is Lock for an owner value that no node can hold yet (redlock
// makes a fresh one for every attempt): a single key then needs only
// SET NX PX, cheaper for the node than the script. Only for nodes whose
// client does not retry (see Retries).
func LockNew(keys []string, value string, ttl time.Duration) *Cmd {
	if len(keys) != 1 {
		return Lock(keys, value, ttl)
	}
	return &Cmd{args: []interface{}{"set", keys[0], value, "px", ttl.Milliseconds(), "nx"}, want: 1, grants: true, g: lockGrant.guarded, ttl: ttl}
}

// LockFenced is Lock that also raises this node's fence registers of keys
// (fences[i] is the register of keys[i]) to this node's candidate fencing
// token: one more than the highest of them, and at least the node's clock
// (TIME) in microseconds. The node's yes carries the candidate (see
// DoValue). Each register's TTL becomes keep unless it already has more
// left: a register's TTL is never shortened.
func LockFenced(keys, fences []string, value string, ttl, keep time.Duration) *Cmd {
	c := fencedGrant.cmd(append(keys[:len(keys):len(keys)], fences...), 1, ttl, value, ttl.Milliseconds(), keep.Milliseconds())
	c.valued = true
	return c
}

// RaiseFence raises the fence registers of keys (fences[i] is the register
// of keys[i]) to token, never lowering them, and their TTL to keep, never
// shortening it, if every key still holds value: a raise that arrives
// after the lock expired on the node is refused, so that it cannot land
// after a later holder read the register.
func RaiseFence(keys, fences []string, value string, token int64, keep time.Duration) *Cmd {
	return scriptCmd(raiseScript, fenceRaiseSrc, append(keys[:len(keys):len(keys)], fences...), 1, value, token, keep.Milliseconds())
}

// Extend resets the TTL of keys to ttl if they all still hold value. It
// never creates a key.
func Extend(keys []string, value string, ttl time.Duration) *Cmd {
	return extendGrant.cmd(keys, 1, ttl, value, ttl.Milliseconds())
}

// Release deletes the keys that still hold value; it says yes if all of
// them did. With announce, each deleted key is announced on
// handoff.Channel(key), with value as the payload, for the waiters of
// package handoff.
func Release(keys []string, value string, announce bool) *Cmd {
	prefix := ""
	if announce {
		prefix = handoff.Prefix
	}
	c := scriptCmd(releaseScript, releaseSrc, keys, int64(len(keys)), value, prefix)
	c.late, c.grants = true, false
	return c
}

// ReleaseAnnouncing is Release of one key that announces its release on
// handoff.Channel(as) instead of the key's own channel (a semaphore's
// permit is announced on the semaphore's channel).
func ReleaseAnnouncing(key, value, as string) *Cmd {
	c := scriptCmd(releaseScript, releaseSrc, []string{key}, 1, value, handoff.Prefix, as)
	c.late, c.grants = true, false
	return c
}

// ReentrantLock acquires a reentrant lock (reentrant_lock.lua) on key
// for value with ttl: a new hold when hold is value itself, else an entry
// of the hold named hold, which must still have a live entry there. A key
// of another type gets an error reply starting with REDLOCKTYPE.
func ReentrantLock(key, value string, ttl time.Duration, hold string) *Cmd {
	return reentrantGrant.cmd([]string{key}, 1, ttl, value, ttl.Milliseconds(), hold)
}

// ReadLock acquires a reader's share of a read-write lock (rw_lock.lua) on
// key for value with ttl: granted where no writer holds it and no refused
// writer's intent is live. A key of another type gets an error reply
// starting with REDLOCKTYPE.
func ReadLock(key, value string, ttl time.Duration) *Cmd {
	return rwGrant.cmd([]string{key}, 1, ttl, value, ttl.Milliseconds(), "read")
}

// WriteLock acquires the writer's hold of a read-write lock (rw_lock.lua)
// on key for value with ttl: granted where nobody holds it. Refused, it
// keeps new readers out for intent (renewed by each refused attempt).
func WriteLock(key, value string, ttl, intent time.Duration) *Cmd {
	return rwGrant.cmd([]string{key}, 1, ttl, value, ttl.Milliseconds(), "write", intent.Milliseconds())
}

// ClearIntent clears, on a node that refused the writer's attempt value,
// the intent that attempt left there (rw_clear.lua), once the writer got
// in elsewhere and released: it says yes if it cleared it.
func ClearIntent(key, value string) *Cmd {
	c := scriptCmd(rwClearScript, rwClearSrc, []string{key}, 1, value)
	c.late, c.grants = true, false
	return c
}

// IsWrongType reports a node's refusal of a typed lock on a key of
// another type or on data that is not a lock.
func IsWrongType(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "REDLOCKTYPE")
}

// Announces reports whether releases on this node are announced: not on a
// cluster client, where PUBLISH goes to every node of the cluster and the
// waiters do not subscribe (see package handoff).
func (n *Node) Announces() bool { return !n.cluster }

// Do sends c and reports whether the node said yes. An error means the
// outcome is unknown: the command may have run. A script the node does not
// know (after a restart or SCRIPT FLUSH) is sent again as EVAL.
func (n *Node) Do(ctx context.Context, c *Cmd) (bool, error) {
	_, ok, err := n.DoValue(ctx, c)
	return ok, err
}

// DoValue is Do that also returns the value a yes carries: the node's
// candidate fencing token for LockFenced, 0 for the other commands.
func (n *Node) DoValue(ctx context.Context, c *Cmd) (int64, bool, error) {
	var v int64
	var err error
	switch {
	case n.coalesce:
		v, err = n.coalesced(ctx, c)
	case !n.deadlineGuard:
		v, err = n.do(ctx, c)
	default:
		v, err = n.deadlineGuarded(ctx, c)
	}
	switch {
	case err != nil:
		return 0, false, err
	case c.valued:
		return v, v > 0, nil
	}
	return 0, c.yes(v), nil
}

// do returns the node's reply: the script's integer, or for SET NX 1 (OK)
// or 0 (nil).
func (n *Node) do(ctx context.Context, c *Cmd) (int64, error) {
	args, src, want := n.wire(c)
	v, err := n.run(ctx, c, args)
	if err != nil && src != "" && isNoScript(err) {
		v, err = n.run(ctx, c, append([]interface{}{"eval", src}, args[2:]...))
	}
	return v, n.process(want, err)
}

// run sends c as args (EVALSHA, or EVAL after NOSCRIPT) and returns the
// node's reply; on a Durable node a yes to a command that grants stands
// only with WAITAOF's confirmation behind it.
func (n *Node) run(ctx context.Context, c *Cmd, args []interface{}) (int64, error) {
	if !n.aof || !c.grants {
		v, err := n.conn.Do(ctx, args...)
		return reply(args, transport.Reply{Val: v, Err: err})
	}
	var r transport.Reply
	derr := n.pair(ctx, args, &r)
	v, err := reply(args, r)
	if err == nil && derr != nil && c.yes(v) {
		return 0, derr
	}
	return v, err
}

// yes reports whether v, c's reply, is the node's yes.
func (c *Cmd) yes(v int64) bool {
	if c.valued {
		return v > 0
	}
	return v == c.want
}

// keyPos returns the position of the first key in args as sent: after
// EVALSHA/EVAL's script and key count, else (SET) right after the verb.
func keyPos(args []interface{}) int {
	if v, _ := args[0].(string); v == "evalsha" || v == "eval" {
		return 3
	}
	return 1
}

// reply reads the node's reply r to the command args: the script's
// integer, or for SET NX 1 (OK) or 0 (nil).
func reply(args []interface{}, r transport.Reply) (int64, error) {
	switch {
	case r.Err != nil:
		return 0, r.Err
	case keyPos(args) == 1: // SET NX: OK or nil
		if r.Val == nil {
			return 0, nil
		}
		return 1, nil
	}
	return toInt(r.Val)
}

// isNoScript reports the node's answer to an EVALSHA of a script it does
// not know.
func isNoScript(err error) bool { return strings.HasPrefix(err.Error(), "NOSCRIPT") }

// deadlineGuarded runs c on its own goroutine and returns by ctx's deadline even if
// the client ignores it; the command then ends on the client's socket
// timeout.
func (n *Node) deadlineGuarded(ctx context.Context, c *Cmd) (int64, error) {
	return deadlineGuard(ctx, n.track, func() (int64, error) { return n.do(ctx, c) })
}

// deadlineGuard runs fn on its own goroutine, counted by track (if not nil), and
// returns its result, or ctx's error once ctx is done first.
func deadlineGuard[T any](ctx context.Context, track Tracker, fn func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	if track != nil {
		track.Add(1)
	}
	go func() {
		if track != nil {
			defer track.Done()
		}
		v, err := fn()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// HonorsContext reports whether client applies ctx deadlines to its socket
// reads and writes (go-redis does only with ContextTimeoutEnabled).
// Unknown client types are assumed not to.
func HonorsContext(c redis.UniversalClient) bool { return goredisconn.HonorsContext(c) }

// MayRetry reports whether client sends a command again after a network
// error (go-redis MaxRetries, 3 by default; -1 turns it off; cluster
// clients also retry through MaxRedirects). Unknown client types are
// assumed to.
func MayRetry(c redis.UniversalClient) bool { return goredisconn.MayRetry(c) }

// Addr names client by the server(s) it talks to, for errors, logs and the
// duplicate check. Clients whose target cannot be read (sentinel failover
// clients, unknown types) are named by identity.
func Addr(c redis.UniversalClient) string { return goredisconn.Addr(c) }

// IsTimeout reports whether err is a deadline or socket timeout.
func IsTimeout(err error) bool { return transport.IsTimeout(err) }
