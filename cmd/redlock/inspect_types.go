package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/admin"
)

// EntryReport is one holder entry of a reentrant or read-write lock across
// the nodes.
type EntryReport struct {
	Owner  string `json:"owner"`
	Client string `json:"client,omitempty"` // the instance id in Owner
	Held   int    `json:"held"`             // nodes holding it live
	LeftMs int64  `json:"left_ms"`          // least time left on a node holding it
}

// readHold reads what one node holds for k: a string's owner value, a
// typed lock's hash (with its entries' time left on the node's clock) or
// another data type's name.
func readHold(ctx context.Context, c *redis.Client, k string) (NodeHold, error) {
	var h NodeHold
	v, err := c.Get(ctx, k).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return NodeHold{TTLms: -2}, nil
	case err == nil:
		h.Owner = v
	case strings.Contains(err.Error(), "WRONGTYPE"):
		if h.Type, err = c.Type(ctx, k).Result(); err != nil {
			return h, err
		}
		if h.Type == "hash" {
			fields, err := c.HGetAll(ctx, k).Result()
			if err != nil {
				return h, err
			}
			nowMs, err := nodeNow(ctx, c)
			if err != nil {
				return h, err
			}
			parseTyped(&h, fields, nowMs)
		}
	default:
		return h, err
	}
	ttl, _ := c.PTTL(ctx, k).Result()
	h.TTLms = durMs(ttl)
	return h, nil
}

// parseTyped fills h from a hash that is a typed lock (a '#kind' field);
// other hashes stay data of type "hash". Dead entries are left out.
func parseTyped(h *NodeHold, fields map[string]string, nowMs int64) {
	kind := fields["#kind"]
	if kind != "reentrant" && kind != "rw" {
		return
	}
	h.Type, h.Kind = "", kind
	h.Holder = fields["#holder"]
	h.Mode = map[string]string{"r": "read", "w": "write"}[fields["#mode"]]
	if w, err := strconv.ParseInt(fields["#intent"], 10, 64); err == nil && w > nowMs {
		h.IntentMs = w - nowMs
	}
	h.Entries = map[string]int64{}
	for f, v := range fields {
		exp, err := strconv.ParseInt(v, 10, 64)
		if !strings.Contains(f, ":") || err != nil || exp <= nowMs { // entries are owner values (with a colon); metadata has none
			continue
		}
		h.Entries[f] = exp - nowMs
	}
}

// nodeNow is a node's clock in unix ms (TIME), what typed locks' expiries
// are written in.
func nodeNow(ctx context.Context, c *redis.Client) (int64, error) {
	t, err := c.Time(ctx).Result()
	if err != nil {
		return 0, err
	}
	return t.UnixMilli(), nil
}

// summarizeTyped is summarize for a reentrant or read-write lock: an entry
// is held where a node keeps it live; the key is held by a quorum when
// one of its entries is, and a leftover when it has live entries but none
// on a quorum.
func summarizeTyped(key, kind string, holds []NodeHold, quorum int) KeyReport {
	r := KeyReport{Key: key, Kind: kind, Nodes: len(holds), Quorum: quorum, PerNode: holds, MinTTLms: -2}
	entries := map[string]*EntryReport{}
	holders, modes := map[string]int{}, map[string]int{}
	for _, h := range holds {
		if h.TTLms == -2 {
			continue
		}
		if h.TTLms == -1 {
			r.NoTTL = true
		} else if r.MinTTLms == -2 || h.TTLms < r.MinTTLms {
			r.MinTTLms = h.TTLms
		}
		if h.Kind != kind {
			continue // a node holding another shape: counted for none
		}
		holders[h.Holder]++
		modes[h.Mode]++
		r.IntentMs = max(r.IntentMs, h.IntentMs)
		for o, left := range h.Entries {
			e := entries[o]
			if e == nil {
				e = &EntryReport{Owner: o, LeftMs: left}
				e.Client, _ = admin.SplitOwner(o)
				entries[o] = e
			}
			e.Held++
			e.LeftMs = min(e.LeftMs, left)
		}
	}
	for _, e := range entries {
		r.Entries = append(r.Entries, *e)
		r.Held = max(r.Held, e.Held)
	}
	sort.Slice(r.Entries, func(i, j int) bool { return r.Entries[i].Owner < r.Entries[j].Owner })
	if kind == "reentrant" {
		r.Owner = mostCommon(holders)
		r.Client, _ = admin.SplitOwner(r.Owner)
	} else {
		r.Mode = mostCommon(modes)
	}
	r.QuorumHeld = r.Held >= quorum
	// No live entry: the key only waits out its TTL (a waiting writer's
	// intent can outlive its readers), nobody holds it.
	r.Partial = !r.QuorumHeld && len(r.Entries) > 0
	return r
}

// mostCommon is the value counted most often (the least on a tie).
func mostCommon(count map[string]int) string {
	best, n := "", 0
	for v, c := range count {
		if c > n || c == n && v < best {
			best, n = v, c
		}
	}
	return best
}

// permitOf reports the semaphore and permit index of a permit key
// (admin.PermitKey).
func permitOf(k string) (sem string, i int, ok bool) {
	rest, found := strings.CutPrefix(k, "{")
	if !found {
		return "", 0, false
	}
	j := strings.LastIndex(rest, "}:permit:")
	if j < 0 {
		return "", 0, false
	}
	i, err := strconv.Atoi(rest[j+len("}:permit:"):])
	if err != nil || admin.PermitKey(rest[:j], i) != k {
		return "", 0, false
	}
	return rest[:j], i, true
}

// kindOf is the lock type a key's holds show: "semaphore" for a permit
// key, the hash's '#kind' for a typed lock, "" for a plain lock or data.
func kindOf(key string, holds []NodeHold) string {
	if _, _, ok := permitOf(key); ok {
		return "semaphore"
	}
	count := map[string]int{}
	for _, h := range holds {
		if h.Kind != "" {
			count[h.Kind]++
		}
	}
	return mostCommon(count)
}

// leftCell is a time left in ms, readably.
func leftCell(ms int64) string {
	if ms < 0 {
		return "-"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

// nodesCell is the per-node column: # where held, x where another owner
// or shape, . where absent, ? where the node was not reached; held reports a node's hold as the one shown.
func nodesCell(holds []NodeHold, held func(NodeHold) bool) string {
	var b strings.Builder
	for _, h := range holds {
		switch {
		case h.Missing != "":
			b.WriteByte('?')
		case h.TTLms == -2:
			b.WriteByte('.')
		case held(h):
			b.WriteByte('#')
		default:
			b.WriteByte('x')
		}
	}
	return b.String()
}

// printTyped writes the reentrant and read-write locks, a block each: a
// line with the key's state, then one row per live entry with its holder
// and time left.
func printTyped(out io.Writer, reports []KeyReport) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, r := range reports {
		fmt.Fprintf(tw, "%s: %s; held on %d/%d nodes (quorum %s), min TTL %s%s\n", r.Key, typedState(r), r.Held, r.Nodes,
			yesNo(r.QuorumHeld), leftCell(r.MinTTLms), flagNote(r))
		if len(r.Entries) == 0 {
			continue
		}
		role := "ENTRY"
		if r.Kind == "rw" {
			role = map[string]string{"read": "READER", "write": "WRITER"}[r.Mode]
		}
		fmt.Fprintf(tw, "  %s\tCLIENT\tOWNER\tNODES\tHELD\tTIME LEFT\n", role)
		for i, e := range r.Entries {
			client, attempt := admin.SplitOwner(e.Owner)
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%d/%d\t%s\n", i+1, orDash(client), attempt,
				nodesCell(r.PerNode, func(h NodeHold) bool { _, ok := h.Entries[e.Owner]; return ok }), e.Held, r.Nodes, leftCell(e.LeftMs))
		}
	}
	tw.Flush()
	fmt.Fprintln(out, "an entry per Lock (reentrant: per entry of the hold): NODES # holds it live, x not, . key absent; TIME LEFT by the nodes' clocks, the least")
}

// typedState names the lock and its state: the hold and its entry count
// (reentrant), or the mode, holders and a waiting writer's intent (rw).
func typedState(r KeyReport) string {
	if r.Kind == "reentrant" {
		client, attempt := admin.SplitOwner(r.Owner)
		return fmt.Sprintf("reentrant lock, hold of %s (owner %s), %d entries", orDash(client), attempt, len(r.Entries))
	}
	s := "read-write lock, free"
	switch {
	case r.Mode == "write" && len(r.Entries) > 0:
		s = "read-write lock, write mode, 1 writer"
	case r.Mode == "read" && len(r.Entries) > 0:
		s = fmt.Sprintf("read-write lock, read mode, %d readers", len(r.Entries))
	}
	if r.IntentMs > 0 {
		s += fmt.Sprintf(", a writer waits: new readers kept out for %s", leftCell(r.IntentMs))
	}
	return s
}

// flagNote is the key's flags after its state line, "" for none.
func flagNote(r KeyReport) string {
	if f := flagsOf(r); len(f) > 0 {
		return " " + strings.Join(f, ",")
	}
	return ""
}

// printSemaphores writes the permit keys grouped per semaphore: how many
// permits are held by a quorum of the permit keys seen, and who holds
// each.
func printSemaphores(out io.Writer, reports []KeyReport) {
	by := map[string][]KeyReport{}
	var names []string
	for _, r := range reports {
		if _, ok := by[r.Semaphore]; !ok {
			names = append(names, r.Semaphore)
		}
		by[r.Semaphore] = append(by[r.Semaphore], r)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEMAPHORE\tPERMITS HELD/SEEN\tPERMIT\tCLIENT\tOWNER\tNODES\tHELD\tMIN TTL\tFLAGS")
	for _, name := range names {
		ps := by[name]
		sort.Slice(ps, func(i, j int) bool { return ps[i].Permit < ps[j].Permit })
		held := 0
		for _, p := range ps {
			if p.QuorumHeld {
				held++
			}
		}
		fmt.Fprintf(tw, "%s\t%d/%d\t\t\t\t\t\t\t\n", name, held, len(ps))
		for _, p := range ps {
			client, attempt := admin.SplitOwner(p.Owner)
			fmt.Fprintf(tw, "\t\t%d\t%s\t%s\t%s\t%d/%d\t%s\t%s\n", p.Permit, orDash(client), attempt,
				nodesCell(p.PerNode, func(h NodeHold) bool { return h.Owner == p.Owner && h.Type == "" }), p.Held, p.Nodes,
				leftCell(p.MinTTLms), strings.Join(flagsOf(p), ","))
		}
	}
	tw.Flush()
	fmt.Fprintln(out, "PERMITS HELD/SEEN: permits held by a quorum / permit keys found (a plain lock each, {name}:permit:i)")
}

func flagsOf(r KeyReport) []string {
	var flags []string
	if r.Partial {
		flags = append(flags, "PARTIAL")
	}
	if r.NoTTL {
		flags = append(flags, "NO-TTL")
	}
	if r.Unknown {
		flags = append(flags, "UNKNOWN")
	}
	return flags
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
