package node

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
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
}

// Durable reports whether the node keeps every acknowledged write across a
// restart: appendonly yes with appendfsync always.
func (id Identity) Durable() bool { return id.AOF && id.FsyncAlways }

// ErrNoRunID is returned by ParseInfo for INFO text without a run_id.
var ErrNoRunID = errors.New("redlock/node: INFO has no run_id")

// Identify asks the node for its identity in one round trip: INFO server
// persistence replication (several sections need Redis 7.0) and CONFIG GET
// appendfsync, pipelined, bounded by ctx's deadline. INFO does not report
// appendfsync; where CONFIG is disabled (renamed away) FsyncAlways stays
// false, which errs on the side of quarantine. It returns INFO's error, or
// ParseInfo's. Like Do, it returns by ctx's deadline also on a client that
// ignores ctx deadlines (the call then ends in the background, counted by
// the node's Tracker).
func (n *Node) Identify(ctx context.Context) (Identity, error) {
	id, _, err := n.IdentifyRegister(ctx)
	return id, err
}

// IdentifyRegister is Identify with the node's TTL register read in the
// same round trip (see ReadRegister): regErr is the register read's own
// error (a refused script, an ACL without the keys), nil when it was read;
// an error reply to one command never stands for another's.
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
	if !n.guard {
		r, err = call()
	} else {
		r, err = guard(ctx, n.track, call)
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
	var info *redis.StringCmd
	var fsync *redis.MapStringStringCmd
	var reg registerRead
	_, perr := n.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		info = p.Info(ctx, "server", "persistence", "replication")
		fsync = p.ConfigGet(ctx, "appendfsync")
		reg = queueRegister(ctx, p)
		return nil
	})
	s, err := info.Result()
	if err == nil && s == "" && perr != nil {
		err = perr // no connection: go-redis leaves the commands' errors unset
	}
	if err != nil {
		return Identity{}, Register{}, nil, err
	}
	id, err := ParseInfo(s)
	if err != nil {
		return Identity{}, Register{}, nil, err
	}
	if m, err := fsync.Result(); err == nil {
		id.FsyncAlways = m["appendfsync"] == "always"
	}
	r, rerr := reg.result()
	return id, r, rerr, nil
}

// ParseInfo reads an Identity from INFO text (lines "field:value", CRLF
// or LF). INFO reports aof_enabled but not appendfsync: FsyncAlways is set
// only from an "appendfsync:always" line, which Identify adds from CONFIG
// GET. It fails with ErrNoRunID when the text has no run_id.
func ParseInfo(s string) (Identity, error) {
	f := InfoFields(s)
	id := Identity{RunID: f["run_id"], Role: f["role"], AOF: f["aof_enabled"] == "1",
		FsyncAlways: f["appendfsync"] == "always", Version: f["redis_version"],
		Promoted: f["second_repl_offset"] != "" && f["second_repl_offset"] != "-1"}
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
