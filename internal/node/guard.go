package node

import (
	_ "embed"
	"errors"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// The process guard. A node's votes are bound to one server process (Bind,
// the run_id this Client learned and judged). Every command that may grant
// or lengthen a lock then goes as its script's guarded form: the script
// first reads the node's run_id (INFO server) and, on any other process,
// refuses before it writes, naming the process it found (*ProcessError).
// So a restart, a proxy that reconnected upstream under a kept connection,
// or a promoted replica is seen by the very reply that would have voted,
// not by a connection event.

//go:embed guard.lua
var guardTail string

// guardedScript is the guarded form of a grant script: src wrapped as a
// function body(KEYS, ARGV), then guard.lua, which takes the run_id from
// ARGV[1] and calls body with the rest.
type guardedScript struct {
	script *redis.Script
	src    string
	hash   interface{} // script.Hash(), boxed once
}

func guardScript(src string) *guardedScript {
	g := "local function body(KEYS, ARGV)\n" + src + "\nend\n" + guardTail
	s := redis.NewScript(g)
	return &guardedScript{script: s, src: g, hash: s.Hash()}
}

// ProcessError is a grant refused by the node's process guard: the node
// runs a server process other than the one its votes are bound to (see
// Bind). Nothing was written. It unwraps to the node's error reply.
type ProcessError struct {
	Want, Got string // run_ids: the bound process, the one that answered
	Err       error
}

func (e *ProcessError) Error() string {
	return "redlock: node runs another server process (run_id " + e.Got + ", votes bound to " + e.Want +
		"): it may have lost locks, not counted until its identity is judged"
}

func (e *ProcessError) Unwrap() error { return e.Err }

// IsProcessError reports whether err is or wraps a *ProcessError.
func IsProcessError(err error) bool {
	var pe *ProcessError
	return errors.As(err, &pe)
}

const procPrefix = "REDLOCKPROC "

// process turns the guard's refusal into a *ProcessError (and tells the
// node's watcher, see Bind); other errors are returned as they are.
func (n *Node) process(want string, err error) error {
	if err == nil || !strings.HasPrefix(err.Error(), procPrefix) { // an error reply is its own text
		return err
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return err
	}
	pe := &ProcessError{Want: want, Got: strings.TrimPrefix(re.Error(), procPrefix), Err: err}
	if f := n.changed.Load(); f != nil {
		(*f)(pe.Got)
	}
	return pe
}

// Bind binds n's votes to the server process runID: from now on every
// command that may grant or lengthen a lock runs only on that process (see
// ProcessError). "" unbinds. changed, if not nil, is called (on the
// caller's goroutine) with the run_id of each process the guard found
// instead. Safe for concurrent use.
func (n *Node) Bind(runID string, changed func(got string)) {
	n.expect.Store(&boundProcess{runID, runID})
	if changed != nil {
		n.changed.Store(&changed)
	}
}

// boundProcess is the run_id n's votes are bound to, also boxed once (an
// argument of every guarded command).
type boundProcess struct {
	id  string
	arg interface{}
}

// bound returns the run_id n's votes are bound to, "" if none, and its
// boxed form.
func (n *Node) bound() (string, interface{}) {
	if p := n.expect.Load(); p != nil {
		return p.id, p.arg
	}
	return "", nil
}

// wire returns the arguments and source c goes out as on n: c's own, or,
// while n is bound and c may grant, its guarded form with the run_id
// inserted as the script's first argument (a SET NX goes as the guarded
// Lock script). want is the run_id it is bound to ("" unguarded).
func (n *Node) wire(c *Cmd) (args []interface{}, src, want string) {
	want, arg := n.bound()
	if want == "" || c.g == nil {
		return c.args, c.src, ""
	}
	if c.src == "" { // SET key value PX ms NX
		return []interface{}{"evalsha", c.g.hash, 1, c.args[1], arg, c.args[2], c.args[4]}, c.g.src, want
	}
	nk := c.args[2].(int)
	args = make([]interface{}, 0, len(c.args)+1)
	args = append(args, "evalsha", c.g.hash)
	args = append(args, c.args[2:3+nk]...)
	args = append(args, arg)
	args = append(args, c.args[3+nk:]...)
	return args, c.g.src, want
}

// atomicFn holds the node's process watcher.
type atomicFn = atomic.Pointer[func(string)]
