package node

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redlock-go/redlock/transport"
)

// Identity is what a node says about itself in INFO: which server process
// it is (RunID changes on every start), how long it has run, its role and
// whether it persists every write before answering.
type Identity struct {
	RunID       string
	Uptime      time.Duration
	Role        string // "master" or "slave"
	AOF         bool   // appendonly yes (aof_enabled:1)
	FsyncAlways bool   // appendfsync always; only meaningful with AOF
	Version     string
	// Promoted: the process was a replica and was promoted in its current
	// life (INFO replication's second_repl_offset is set): its data came
	// by asynchronous replication, not from its own append-only file, so a
	// stamp it carries proves nothing about votes confirmed on the old
	// primary's disk.
	Promoted bool
	// Replicated: the process fed a replica within its backlog's life
	// (repl_backlog_active) or has one now: a copy of its data, stamps
	// included, may live on elsewhere and be promoted.
	Replicated bool
	Evicted    int64 // evicted_keys
	// Evicts: maxmemory is set with a policy that can evict a key with a
	// TTL (every policy but noeviction); also when CONFIG GET is refused.
	Evicts bool
}

// Durable reports whether the node keeps every acknowledged write across a
// restart: appendonly yes with appendfsync always.
func (id Identity) Durable() bool { return id.AOF && id.FsyncAlways }

// ErrNoRunID is returned by ParseInfo for INFO text without a run_id.
var ErrNoRunID = errors.New("redlock/node: INFO has no run_id")

// IdentifyRegister asks the node for its identity and TTL register in one
// round trip: INFO server persistence replication stats (several sections
// need Redis 7.0), CONFIG GET appendfsync maxmemory maxmemory-policy and
// the register (see ReadRegister), pipelined, bounded by ctx's deadline.
// INFO does not report appendfsync; where CONFIG is disabled (renamed away)
// FsyncAlways stays false and Evicts true, which err on the side of
// quarantine. It returns INFO's error, or ParseInfo's; a *RegisterError
// when the identity was read but the register was not (an error reply to
// one command never stands for another's). Like Do, it returns by ctx's
// deadline also on a client that ignores ctx deadlines (the call then ends
// in the background, counted by the node's Tracker).
func (n *Node) IdentifyRegister(ctx context.Context) (Identity, Register, error) {
	type res struct {
		id     Identity
		reg    Register
		regErr error
	}
	call := func() (res, error) {
		id, reg, rerr, err := n.identify(ctx)
		return res{id, reg, rerr}, err
	}
	var r res
	var err error
	if !n.deadlineGuard {
		r, err = call()
	} else {
		r, err = deadlineGuard(ctx, n.track, call)
	}
	if err == nil && r.regErr != nil {
		return r.id, Register{}, &RegisterError{Err: r.regErr}
	}
	return r.id, r.reg, err
}

// RegisterError is IdentifyRegister's error when the identity was read
// but the TTL register was not.
type RegisterError struct{ Err error }

func (e *RegisterError) Error() string {
	return "redlock/node: TTL register not read: " + e.Err.Error()
}
func (e *RegisterError) Unwrap() error { return e.Err }

func (n *Node) identify(ctx context.Context) (Identity, Register, error, error) {
	cmds := append([][]interface{}{
		{"info", "server", "persistence", "replication", "stats"},
		{"config", "get", "appendfsync", "maxmemory", "maxmemory-policy"},
	}, registerCmds...)
	rs := make([]transport.Reply, len(cmds))
	n.conn.Pipeline(ctx, cmds, rs)
	if rs[0].Err != nil {
		return Identity{}, Register{}, nil, rs[0].Err
	}
	s, err := toStr(rs[0].Val)
	if err != nil {
		return Identity{}, Register{}, nil, err
	}
	id, err := ParseInfo(s)
	if err != nil {
		return Identity{}, Register{}, nil, err
	}
	id.FsyncAlways, id.Evicts = configFacts(rs[1])
	r, rerr := parseRegister(rs[2:])
	return id, r, rerr, nil
}

// configFacts reads CONFIG GET appendfsync maxmemory maxmemory-policy (a
// flat list in RESP2, a map in RESP3): whether every write is fsynced
// before its reply, and whether the node may evict a key with a TTL. A
// refused CONFIG says neither.
func configFacts(c transport.Reply) (fsyncAlways, evicts bool) {
	m, err := toStrMap(c.Val)
	if c.Err != nil || err != nil || len(m) == 0 { // refused
		return false, true
	}
	policy, ok := m["maxmemory-policy"]
	return m["appendfsync"] == "always", !ok || m["maxmemory"] != "0" && policy != "noeviction"
}

// ParseInfo reads an Identity from INFO text (lines "field:value", CRLF
// or LF). INFO reports aof_enabled but not appendfsync: FsyncAlways is set
// only from an "appendfsync:always" line, which IdentifyRegister adds from CONFIG
// GET. It fails with ErrNoRunID when the text has no run_id.
func ParseInfo(s string) (Identity, error) {
	f := InfoFields(s)
	id := Identity{RunID: f["run_id"], Role: f["role"], AOF: f["aof_enabled"] == "1",
		FsyncAlways: f["appendfsync"] == "always", Version: f["redis_version"],
		Promoted:   f["second_repl_offset"] != "" && f["second_repl_offset"] != "-1",
		Replicated: f["repl_backlog_active"] == "1" || f["connected_slaves"] != "" && f["connected_slaves"] != "0"}
	if v, ok := f["evicted_keys"]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return Identity{}, fmt.Errorf("redlock/node: INFO evicted_keys %q: %w", v, err)
		}
		id.Evicted = n
	}
	if v, ok := f["uptime_in_seconds"]; ok {
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return Identity{}, fmt.Errorf("redlock/node: INFO uptime_in_seconds %q: %w", v, err)
		}
		id.Uptime = time.Duration(sec) * time.Second
	}
	if id.RunID == "" {
		return Identity{}, ErrNoRunID
	}
	return id, nil
}

// InfoFields splits INFO text into its "field:value" lines (CRLF or LF),
// skipping section headers and blank lines.
func InfoFields(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m
}
