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
	MaxTTL      time.Duration // the node's MaxTTLKey register (Identify only); 0 unset or unreadable
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
	if !n.guard {
		return n.identify(ctx)
	}
	return guard(ctx, n.track, func() (Identity, error) { return n.identify(ctx) })
}

func (n *Node) identify(ctx context.Context) (Identity, error) {
	var info *redis.StringCmd
	var fsync *redis.MapStringStringCmd
	var reg *redis.StringCmd
	_, perr := n.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		info = p.Info(ctx, "server", "persistence", "replication")
		fsync = p.ConfigGet(ctx, "appendfsync")
		reg = p.Get(ctx, MaxTTLKey)
		return nil
	})
	s, err := info.Result()
	if err == nil && s == "" && perr != nil {
		err = perr // no connection: go-redis leaves the commands' errors unset
	}
	if err != nil {
		return Identity{}, err
	}
	id, err := ParseInfo(s)
	if err != nil {
		return Identity{}, err
	}
	if m, err := fsync.Result(); err == nil {
		id.FsyncAlways = m["appendfsync"] == "always"
	}
	if ms, err := reg.Int64(); err == nil && ms > 0 { // unset, refused (ACL) or malformed: 0
		id.MaxTTL = time.Duration(ms) * time.Millisecond
	}
	return id, nil
}

// ParseInfo reads an Identity from INFO text (lines "field:value", CRLF
// or LF). INFO reports aof_enabled but not appendfsync: FsyncAlways is set
// only from an "appendfsync:always" line, which Identify adds from CONFIG
// GET. It fails with ErrNoRunID when the text has no run_id.
func ParseInfo(s string) (Identity, error) {
	f := InfoFields(s)
	id := Identity{RunID: f["run_id"], Role: f["role"], AOF: f["aof_enabled"] == "1",
		FsyncAlways: f["appendfsync"] == "always", Version: f["redis_version"]}
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
