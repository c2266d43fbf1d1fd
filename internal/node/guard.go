package node

import (
	_ "embed"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/transport"
)

// The process guard. A node's votes are bound to one server process and
// its eviction count (Bind: what this Client learned and judged). Every
// command that may grant or lengthen a lock then goes as its script's
// guarded form (guard.lua): the script first reads the node's run_id
// (INFO server) and, on any other process, or on keys evicted since,
// refuses before it writes, naming what it found (*ProcessError). So a
// restart, a proxy that reconnected upstream under a kept connection, a
// promoted replica or an eviction is seen by the very reply that would
// have voted, not by a connection event. The same script makes sure the
// node's TTL register carries the lock's TTL in an entry that outlives it
// (see TTLRegisterKey) before it grants: an entry that was evicted or
// flushed is written again by the grant that needs it.

//go:embed guard.lua
var guardTail string

// guardedScript is the guarded form of a grant script: src wrapped as a
// function body(KEYS, ARGV), then guard.lua, which takes the run_id from
// ARGV[1] and calls body with the rest.
type guardedScript struct {
	script *script
	src    string
	hash   interface{} // script.Hash(), boxed once
}

func guardScript(src string) *guardedScript {
	g := "local function body(KEYS, ARGV)\n" + src + "\nend\n" + guardTail
	s := newScript(g)
	return &guardedScript{script: s, src: g, hash: s.Hash()}
}

// ProcessError is a grant refused by the node's process guard: the node
// runs a server process other than the one its votes are bound to, or
// evicted keys since they were bound (see Bind). Nothing was written. It
// unwraps to the node's error reply.
type ProcessError struct {
	Want, Got string // run_ids (evicted_keys counts if Evicted): the bound process, the one that answered
	Evicted   bool   // the node evicted keys since it was bound
	Err       error
}

func (e *ProcessError) Error() string {
	if e.Evicted {
		return "redlock: node evicted keys (evicted_keys " + e.Got + ", votes bound at " + e.Want +
			"): it may have lost locks, not counted until that is judged"
	}
	return "redlock: node runs another server process (run_id " + e.Got + ", votes bound to " + e.Want +
		"): it may have lost locks, not counted until its identity is judged"
}

func (e *ProcessError) Unwrap() error { return e.Err }

// IsProcessError reports whether err is or wraps a *ProcessError.
func IsProcessError(err error) bool {
	var pe *ProcessError
	return errors.As(err, &pe)
}

const (
	procPrefix  = "REDLOCKPROC "
	evictPrefix = "REDLOCKEVICT "
)

// process turns the guard's refusal into a *ProcessError (and tells the
// node's watcher, see Bind); other errors are returned as they are.
func (n *Node) process(want string, err error) error {
	if err == nil {
		return err
	}
	msg := err.Error() // an error reply is its own text
	if want != "" && strings.HasPrefix(msg, "NOPERM") && strings.Contains(msg, "key") {
		return &RegisterACLError{Err: err}
	}
	evicted := strings.HasPrefix(msg, evictPrefix)
	if !evicted && !strings.HasPrefix(msg, procPrefix) {
		return err
	}
	if !transport.IsErrorReply(err) {
		return err
	}
	pe := &ProcessError{Want: want, Got: strings.TrimPrefix(strings.TrimPrefix(msg, procPrefix), evictPrefix), Evicted: evicted, Err: err}
	if p := n.expect.Load(); evicted && p != nil {
		pe.Want = p.evicted.(string)
	}
	if f := n.changed.Load(); f != nil {
		(*f)(pe.Got)
	}
	return pe
}

// RegisterACLError is a guarded grant refused by an ACL without one of
// its keys: the lock's own, or those of the TTL register, which the grant
// script writes too. It unwraps to the node's NOPERM.
type RegisterACLError struct{ Err error }

func (e *RegisterACLError) Error() string {
	return e.Err.Error() + " (a grant names the lock's keys and the TTL register's, " + TTLRegisterKey + " and " + AOFStampKey +
		": the ACL needs them all, see docs/deployment.md)"
}

func (e *RegisterACLError) Unwrap() error { return e.Err }

// Binding is what a node's votes are bound to.
type Binding struct {
	RunID   string  // the server process; "" unbinds
	Evicted int64   // its evicted_keys when it was judged
	Factor  float64 // the drift factor: register entries outlive their locks on the Client's clock
}

// Bind binds n's votes to b: from now on every command that may grant or
// lengthen a lock runs only on that process, and only while it has
// evicted no key since (see ProcessError). changed, if not nil, is called
// (on the caller's goroutine) with what the guard found instead. Safe for
// concurrent use.
func (n *Node) Bind(b Binding, changed func(got string)) {
	f := b.Factor
	if f <= 0 || f >= 0.5 {
		f = 0.5
	}
	n.expect.Store(&boundProcess{id: b.RunID, arg: b.RunID, evicted: strconv.FormatInt(b.Evicted, 10), factor: f})
	if changed != nil {
		n.changed.Store(&changed)
	}
}

// boundProcess is a Binding, its arguments boxed once (every guarded
// command carries them).
type boundProcess struct {
	id           string
	arg, evicted interface{}
	factor       float64
	last         atomic.Pointer[guardCache] // the guard's arguments for the TTL used last
}

// guardCache is guardArgs' result for one TTL: a Client mostly locks with
// one TTL, and the arguments are then boxed once, not per command.
type guardCache struct {
	ttl     time.Duration
	durable bool
	args    []interface{}
}

// bound returns the run_id n's votes are bound to, "" if none, and its
// boxed form.
func (n *Node) bound() (string, interface{}) {
	if p := n.expect.Load(); p != nil {
		return p.id, p.arg
	}
	return "", nil
}

// registerSlack is how much longer than its TTL a register entry lives (at
// most; TTLs under it get their own length): one raise per TTL covers the
// locks of about that long, not one per lock.
const registerSlack = 10 * time.Second

// guardArgs returns the guard's arguments for a command granting ttl: the
// binding's, then the register entry (field, how long it must still live,
// how long a raise makes it live, in ms on the node's clock). The entry
// must outlive, on the Client's clock, every lock the command may grant
// or lengthen, by a second.
func (p *boundProcess) guardArgs(ttl time.Duration, durable bool) []interface{} {
	if c := p.last.Load(); c != nil && c.ttl == ttl && c.durable == durable {
		return c.args // shared, read-only
	}
	args := p.makeGuardArgs(ttl, durable)
	p.last.Store(&guardCache{ttl: ttl, durable: durable, args: args})
	return args
}

func (p *boundProcess) makeGuardArgs(ttl time.Duration, durable bool) []interface{} {
	b := TTLBucket(ttl)
	field := strconv.FormatInt(b.Milliseconds(), 10)
	if durable {
		field = "d" + field
	}
	need := time.Duration(float64(b+time.Second)/(1-p.factor)) + time.Millisecond
	hold := time.Duration(float64(b+min(b, registerSlack)+time.Second)/(1-p.factor)) + time.Millisecond
	return []interface{}{p.arg, p.evicted, field, need.Milliseconds(), hold.Milliseconds()}
}

// wire returns the arguments and source c goes out as on n: c's own, or,
// while n is bound and c may grant, its guarded form: the register and its
// stamp after c's keys, the guard's arguments before c's own (a SET NX
// goes as the guarded Lock script). want is the run_id it is bound to (""
// unguarded).
func (n *Node) wire(c *Cmd) (args []interface{}, src, want string) {
	p := n.expect.Load()
	if p == nil || p.id == "" || c.g == nil {
		return c.args, c.src, ""
	}
	g := p.guardArgs(c.ttl, n.aof)
	if c.src == "" { // SET key value PX ms NX
		args = make([]interface{}, 0, 8+len(g))
		args = append(args, "evalsha", c.g.hash, 3, c.args[1], TTLRegisterKey, AOFStampKey)
		args = append(args, g...)
		return append(args, c.args[2], c.args[4]), c.g.src, p.id
	}
	nk := c.args[2].(int)
	args = make([]interface{}, 0, len(c.args)+2+len(g))
	args = append(args, "evalsha", c.g.hash, nk+2)
	args = append(args, c.args[3:3+nk]...)
	args = append(args, TTLRegisterKey, AOFStampKey)
	args = append(args, g...)
	args = append(args, c.args[3+nk:]...)
	return args, c.g.src, p.id
}

// atomicFn holds the node's process watcher.
type atomicFn = atomic.Pointer[func(string)]
