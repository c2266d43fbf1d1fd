package node

import (
	"context"
	_ "embed"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/goredisconn"
	"github.com/redlock-go/redlock/transport"
)

// TTLRegisterKey is the TTL register, one hash per node: field = a lock
// TTL in milliseconds (rounded up by TTLBucket; "d" before it for Clients
// with durable votes), value = until when (in milliseconds on the node's
// own clock) a lock with that TTL may be held on the node. The guarded
// script of every command that may grant or lengthen a lock raises its
// TTL's entry there first (guard.lua), so the node's register covers every
// lock the node holds; entries expire with the last lock that needed them,
// and the key with its latest entry.
const TTLRegisterKey = "redlock:ttl"

// MaxTTLKey is the legacy register (a string: the longest TTL in
// milliseconds, raised only, never expiring) that earlier versions
// published. It is read, never written: while it exists, its TTL counts as
// an entry that never expires, so that Clients of both versions stay
// covered during an upgrade. Delete it once every Client publishes
// TTLRegisterKey.
const MaxTTLKey = "redlock:max-ttl"

// AOFStampKey is a hash beside the TTL register (same hash slot) that
// never expires and has two fields: "aof", the run_id of the process that
// last raised the register (guard.lua), and "prev", the run_id "aof"
// named before that process stamped it. It outlives the register, whose
// entries may all have expired while a node was down.
const AOFStampKey = "{" + TTLRegisterKey + "}:aof"

// TTLBucket rounds ttl up to whole milliseconds with three significant
// digits (400ms and 23h stay, 1001ms becomes 1.01s): a register field
// stands for every TTL up to it, and TTLs computed at run time add at most
// 900 fields per decade instead of one per value.
func TTLBucket(ttl time.Duration) time.Duration {
	ms := (ttl + time.Millisecond - 1) / time.Millisecond
	step := time.Duration(1)
	for ms/step >= 1000 {
		step *= 10
	}
	return (ms + step - 1) / step * step * time.Millisecond
}

// Entry is one live entry of a TTL register: a TTL and how long, on the
// node's clock, the entry has left; Durable for an entry of Clients whose
// votes are confirmed on disk.
type Entry struct {
	TTL, Left time.Duration
	Durable   bool
}

// Register is what a node's TTL register held when it was read.
type Register struct {
	Entries []Entry       // live entries
	Legacy  time.Duration // the legacy MaxTTLKey's TTL (never expires); 0 if absent
	AOFRun  string        // AOFStampKey's "aof": the process that last raised the register; "" none
	AOFPrev string        // AOFStampKey's "prev": the process AOFRun's found stamped before it; "" none
}

// Loaded reports whether the register, read from process cur, shows that
// cur holds the data of process prev, loaded from its append-only file:
// it carries prev's stamp, or cur's stamp made over prev's (see guard.lua).
// A stamp is a write of prev's found in cur; under appendonly yes in cur
// it came from prev's append-only file (see SAFETY.md).
func (r Register) Loaded(prev, cur string) bool {
	return prev != "" && (r.AOFRun == prev || r.AOFRun == cur && r.AOFPrev == prev)
}

// Longest returns the longest TTL the register covers (legacy included).
func (r Register) Longest() time.Duration {
	d := r.Legacy
	for _, e := range r.Entries {
		d = max(d, e.TTL)
	}
	return d
}

// registerCmds read the TTL register in a pipeline: TIME, then the
// register, the legacy key and the stamp, each reply read on its own (an
// error reply to one, e.g. WRONGTYPE or NOPERM, is not copied onto the
// others). TIME comes first: the time each entry has left is measured from
// it, which errs long.
var registerCmds = [][]interface{}{{"time"}, {"hgetall", TTLRegisterKey}, {"get", MaxTTLKey}, {"hgetall", AOFStampKey}}

// parseRegister parses the replies to registerCmds: the live entries, each
// with the time it has left on the node's clock, and the legacy TTL. A
// legacy key that is absent, or of another type, reads as none.
func parseRegister(rs []transport.Reply) (Register, error) {
	if rs[0].Err != nil {
		return Register{}, rs[0].Err
	}
	now, err := parseTime(rs[0].Val)
	if err != nil {
		return Register{}, err
	}
	if rs[1].Err != nil {
		return Register{}, rs[1].Err
	}
	all, err := toStrMap(rs[1].Val)
	if err != nil {
		return Register{}, err
	}
	var r Register
	nowMS := now.UnixMilli()
	for f, v := range all {
		num, durable := strings.CutPrefix(f, "d")
		ttl, err1 := strconv.ParseInt(num, 10, 64)
		exp, err2 := strconv.ParseInt(v, 10, 64)
		if err1 != nil || err2 != nil || ttl <= 0 {
			return Register{}, fmt.Errorf("redlock/node: %s holds %q: %q, not a TTL and an expiry in milliseconds", TTLRegisterKey, f, v)
		}
		if exp > nowMS {
			r.Entries = append(r.Entries, Entry{TTL: time.Duration(ttl) * time.Millisecond, Left: time.Duration(exp-nowMS) * time.Millisecond, Durable: durable})
		}
	}
	sort.Slice(r.Entries, func(i, j int) bool {
		a, b := r.Entries[i], r.Entries[j]
		return a.TTL < b.TTL || a.TTL == b.TTL && !a.Durable && b.Durable
	})
	if ms, err := toInt(rs[2].Val); rs[2].Err == nil && err == nil && ms > 0 {
		r.Legacy = time.Duration(ms) * time.Millisecond
	}
	if m, err := toStrMap(rs[3].Val); rs[3].Err == nil && err == nil { // absent or unreadable: no stamp, not kept
		r.AOFRun, r.AOFPrev = m["aof"], m["prev"]
	}
	return r, nil
}

// ReadRegister reads the TTL register of the node c reaches (for tools
// that hold a plain go-redis client), in one round trip.
func ReadRegister(ctx context.Context, c redis.Cmdable) (Register, error) {
	rs := make([]transport.Reply, len(registerCmds))
	goredisconn.RunPipeline(ctx, c.Pipeline(), registerCmds, rs)
	return parseRegister(rs)
}
