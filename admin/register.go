package admin

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/node"
)

// TTLRegisterKey is the key of a node's TTL register, "redlock:ttl": a hash the Clients
// write before they take a lock with a TTL, one field per TTL, each with
// the time until which a lock of that TTL may still be held on the node.
// A restarted node is kept out of the quorum for as long as the other
// nodes' registers say (see the restart quarantine in SAFETY.md).
const TTLRegisterKey = node.TTLRegisterKey

// LegacyMaxTTLKey, "redlock:max-ttl", is the register earlier versions wrote: a
// string, the longest TTL in milliseconds, which never expires. Clients
// still honour it; delete it once every Client is upgraded.
const LegacyMaxTTLKey = node.MaxTTLKey

// IsRegisterKey reports whether k is one of the keys the library keeps on
// every node beside the locks (the TTL register, the legacy max-TTL key,
// the register's append-only-file stamp), for a tool that scans a node's
// keys and must not take them for locks.
func IsRegisterKey(k string) bool {
	return k == node.TTLRegisterKey || k == node.MaxTTLKey || k == node.AOFStampKey
}

// Register is what a node's TTL register held when ReadRegister read it.
type Register struct {
	// Entries are the live entries, shortest TTL first.
	Entries []RegisterEntry
	// Legacy is the TTL in LegacyMaxTTLKey, 0 if the key is absent or not
	// a positive number.
	Legacy time.Duration
}

// RegisterEntry is one live entry of a TTL register.
type RegisterEntry struct {
	// TTL is the lock TTL the entry covers, rounded up to three
	// significant digits of milliseconds (it covers every TTL up to it).
	TTL time.Duration
	// Left is how long the entry lives on, on the node's clock.
	Left time.Duration
	// Durable marks an entry of Clients whose votes are confirmed on disk
	// (redlock.WithDurableVotes).
	Durable bool
}

// ReadRegister reads the TTL register and the legacy key of the node c
// reaches, in one round trip within ctx. c must reach one node (a
// *redis.Client, not a Cluster or Ring client). A nil c is refused with
// redlock.ErrInvalidArgument before anything is sent. On failure it
// returns the node's or connection's error, wrapped: a register that
// holds something other than TTLs is an error, a legacy key of another
// type reads as absent.
func ReadRegister(ctx context.Context, c redis.Cmdable) (Register, error) {
	if c == nil {
		return Register{}, fmt.Errorf("%w: ReadRegister: nil client", redlock.ErrInvalidArgument)
	}
	reg, err := node.ReadRegister(ctx, c)
	if err != nil {
		return Register{}, fmt.Errorf("redlock: TTL register not read: %w", err)
	}
	r := Register{Entries: make([]RegisterEntry, 0, len(reg.Entries)), Legacy: reg.Legacy}
	for _, e := range reg.Entries {
		r.Entries = append(r.Entries, RegisterEntry{TTL: e.TTL, Left: e.Left, Durable: e.Durable})
	}
	return r, nil
}

// InfoFields parses the text of an INFO reply into its "name:value"
// fields, the parser the library judges nodes with. Section headers,
// comments, blank lines and lines without a colon are skipped; a name
// that appears twice keeps its last value. It never fails: text that is
// not INFO gives an empty or partial map.
func InfoFields(s string) map[string]string { return node.InfoFields(s) }
