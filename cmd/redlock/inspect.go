package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
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

// NodeHold is what one node holds for a key.
type NodeHold struct {
	Node  string `json:"node"`
	Owner string `json:"owner,omitempty"` // "" when the node does not hold the key
	TTLms int64  `json:"ttl_ms"`          // -1: no TTL, -2: absent or not known (Missing)
	// Missing says why the node was not read (unreachable, bad
	// credentials); "" when it was.
	Missing string `json:"missing,omitempty"`
	Type    string `json:"type,omitempty"` // set when the key is not a string nor a typed lock
	// A reentrant or read-write lock (a hash with a '#kind' field):
	Kind     string           `json:"kind,omitempty"`      // "reentrant" or "rw"
	Holder   string           `json:"holder,omitempty"`    // reentrant: the hold's name (its first entry's owner)
	Mode     string           `json:"mode,omitempty"`      // rw: "read" or "write"
	IntentMs int64            `json:"intent_ms,omitempty"` // rw: how long a refused writer still keeps new readers out
	Entries  map[string]int64 `json:"entries,omitempty"`   // live entries: owner value -> ms left on the node's clock
}

// KeyReport is one lock key across the nodes.
type KeyReport struct {
	Key        string `json:"key"`
	Owner      string `json:"owner"`            // the owner held on the most nodes
	Client     string `json:"client,omitempty"` // the instance id in Owner (redlock.Client.ID): who holds it
	Held       int    `json:"held"`             // nodes holding that owner
	Nodes      int    `json:"nodes"`            // nodes inspected
	Quorum     int    `json:"quorum"`           // votes a lock needs
	QuorumHeld bool   `json:"quorum_held"`
	Partial    bool   `json:"partial"` // held by fewer than a quorum, even counting the nodes not reached: a leftover
	// Unknown: held by fewer than a quorum of the nodes reached, but the
	// nodes not reached could make it a quorum.
	Unknown  bool  `json:"unknown,omitempty"`
	NoTTL    bool  `json:"no_ttl"` // some node holds it without expiry
	MinTTLms int64 `json:"min_ttl_ms"`
	// Fence is the highest fence register of the key on the nodes (see
	// admin.FenceKey): the token of the latest holder that took it
	// with fencing; 0 if it never had one or the register expired.
	Fence int64 `json:"fence,omitempty"`
	// Kind is the lock type: "" plain (or not a lock), "reentrant", "rw",
	// "semaphore" (a permit key, admin.PermitKey).
	Kind string `json:"kind,omitempty"`
	// Reentrant and rw: Owner is the reentrant hold's name; Held counts the
	// nodes of the best-held entry.
	Entries  []EntryReport `json:"entries,omitempty"`
	Mode     string        `json:"mode,omitempty"`      // rw: "read" or "write"
	IntentMs int64         `json:"intent_ms,omitempty"` // rw: a waiting writer keeps new readers out this long
	// Semaphore: the permit's semaphore (the key given to Permits) and
	// index.
	Semaphore string     `json:"semaphore,omitempty"`
	Permit    int        `json:"permit,omitempty"`
	PerNode   []NodeHold `json:"per_node"`
}

// isFenceKey reports whether k is the fence register of a lock key
// (admin.FenceKey): it is not itself a lock, and it outlives the lock
// by design (the lock's TTL plus admin.FenceMargin).
func isFenceKey(k string) bool {
	base, ok := strings.CutSuffix(k, ":fence")
	if !ok {
		return false
	}
	if admin.FenceKey(base) == k {
		return true
	}
	return len(base) > 2 && base[0] == '{' && base[len(base)-1] == '}' && admin.FenceKey(base[1:len(base)-1]) == k
}

// fence returns the highest value of key's fence register on the nodes.
func fence(ctx context.Context, clients []*redis.Client, key string) int64 {
	var top int64
	for _, c := range clients {
		if c == nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		v, err := c.Get(cctx, admin.FenceKey(key)).Int64()
		cancel()
		if err == nil && v > top {
			top = v
		}
	}
	return top
}

func inspectCmd(fs *flag.FlagSet) runner {
	nodes := nodeFlags(fs)
	asJSON := fs.Bool("json", false, "print JSON (an array, [] when no key matches)")
	quorum := fs.Int("quorum", 0, "votes a lock needs (default: majority)")
	return func(pos []string, out, errOut io.Writer) error {
		if len(pos) != 1 {
			return usageErr("inspect takes one PATTERN (e.g. 'lock:*'), got %d arguments", len(pos))
		}
		urls, err := nodes.urls()
		if err != nil {
			return err
		}
		q := *quorum
		if q == 0 {
			q = len(urls)/2 + 1
		}
		if q <= len(urls)/2 || q > len(urls) {
			return usageErr("--quorum %d is out of range for %d nodes", q, len(urls))
		}
		set, err := connectSome(urls)
		if err != nil {
			return err
		}
		defer set.close()
		if set.answered() == 0 {
			return noNode(set)
		}
		reports, err := inspect(context.Background(), set, pos[0], q)
		if err != nil {
			return err
		}
		if *asJSON {
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			if err := enc.Encode(reports); err != nil {
				return err
			}
		} else {
			printReports(out, reports)
			printRegisters(context.Background(), out, set.clients, set.shown)
		}
		if err := reachVerdict(set, q, errOut, "keys held only there are not shown"); err != nil {
			return err
		}
		bad := 0
		for _, r := range reports {
			if r.Partial || r.NoTTL {
				bad++
			}
		}
		if bad > 0 {
			return fmt.Errorf("%d of %d keys are partial leftovers or have no TTL", bad, len(reports))
		}
		return nil
	}
}

// noNode is the error when no node answered (exit 3), naming each.
func noNode(set *nodeSet) error {
	return &exitError{exitUnreachable, fmt.Errorf("no node answered:\n  %s", strings.Join(set.missingLines(), "\n  "))}
}

// reachVerdict says which nodes were not reached, if any: a warning on
// errOut when a quorum (q) answered, so the result stands; an error with
// exit 3 when fewer did. what says what the missing nodes mean for the
// result.
func reachVerdict(set *nodeSet, q int, errOut io.Writer, what string) error {
	missing := set.missingLines()
	if len(missing) == 0 {
		return nil
	}
	msg := fmt.Sprintf("%d of %d nodes not reached (%s):\n  %s", len(missing), len(set.clients), what, strings.Join(missing, "\n  "))
	if n := set.answered(); n < q {
		return &exitError{exitUnreachable, fmt.Errorf("only %d of %d nodes answered, fewer than the quorum %d; %s", n, len(set.clients), q, msg)}
	}
	fmt.Fprintf(errOut, "warning: %s\n", msg)
	return nil
}

// scanKeys finds the keys matching pattern on any node, and the permit
// keys of the semaphores whose names match it ("lock:*" finds
// "{lock:sem}:permit:0"), each with a NodeHold per node to fill (absent
// until read).
// A node whose SCAN fails is dropped from set.
func scanKeys(ctx context.Context, set *nodeSet, pattern string) map[string][]NodeHold {
	per := map[string][]NodeHold{}
	for i, c := range set.clients {
		if c == nil {
			continue
		}
		for _, p := range []string{pattern, "{" + pattern + "}:permit:*"} { // the form of admin.PermitKey
			if err := scanNode(ctx, c, set.shown, p, per); err != nil {
				set.drop(i, err)
				break
			}
		}
	}
	return per
}

// scanNode adds the keys node i holds that match pattern to per.
func scanNode(ctx context.Context, c *redis.Client, urls []string, pattern string, per map[string][]NodeHold) error {
	var cursor uint64
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		keys, next, err := c.Scan(cctx, cursor, pattern, 1000).Result()
		cancel()
		if err != nil {
			return err
		}
		for _, k := range keys {
			if isFenceKey(k) || admin.IsRegisterKey(k) { // not locks: a lock's fence register, the Clients' TTL registers
				continue
			}
			if _, ok := per[k]; !ok {
				per[k] = make([]NodeHold, len(urls))
				for j := range urls {
					per[k][j] = NodeHold{Node: urls[j], TTLms: -2}
				}
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// inspect reports every key matching pattern on the nodes of set that
// answer, sorted by key; never nil, so that JSON shows [] for no match. A
// node that fails on the way is dropped from set and shown as missing in
// every report.
func inspect(ctx context.Context, set *nodeSet, pattern string, quorum int) ([]KeyReport, error) {
	per := scanKeys(ctx, set, pattern)
	for k, holds := range per {
		for i, c := range set.clients {
			if c == nil {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			h, err := readHold(cctx, c, k)
			cancel()
			if err != nil {
				set.drop(i, err)
				continue
			}
			h.Node = set.shown[i]
			holds[i] = h
		}
	}
	reports := []KeyReport{}
	for k, holds := range per {
		for i, c := range set.clients {
			if c == nil { // not reached, or dropped after some keys were read
				holds[i] = NodeHold{Node: set.shown[i], TTLms: -2, Missing: set.missing[i]}
			}
		}
		reports = append(reports, keyReport(ctx, set.clients, k, holds, quorum))
	}
	sort.Slice(reports, func(i, j int) bool { return reports[i].Key < reports[j].Key })
	return reports, nil
}

// keyReport summarizes k's holds as its lock type reads.
func keyReport(ctx context.Context, clients []*redis.Client, k string, holds []NodeHold, quorum int) KeyReport {
	var r KeyReport
	switch kind := kindOf(k, holds); kind {
	case "reentrant", "rw":
		r = summarizeTyped(k, kind, holds, quorum)
	case "semaphore":
		r = summarize(k, holds, quorum)
		r.Kind = kind
		r.Semaphore, r.Permit, _ = permitOf(k)
	default:
		r = summarize(k, holds, quorum)
		r.Fence = fence(ctx, clients, k)
	}
	unsure(&r)
	return r
}

// unsure marks a key that fewer than a quorum of the nodes reached hold,
// but that the nodes not reached could make up to a quorum: it is not a
// sure leftover (Partial) but Unknown.
func unsure(r *KeyReport) {
	missing := 0
	for _, h := range r.PerNode {
		if h.Missing != "" {
			missing++
		}
	}
	if !r.QuorumHeld && missing > 0 && r.Held+missing >= r.Quorum {
		r.Partial, r.Unknown = false, true
	}
}

// durMs maps go-redis PTTL results to milliseconds, keeping -1 (no TTL)
// and -2 (absent).
func durMs(d time.Duration) int64 {
	if d < 0 {
		if d == -1 || d == -1*time.Millisecond {
			return -1
		}
		return -2
	}
	return d.Milliseconds()
}

func summarize(key string, holds []NodeHold, quorum int) KeyReport {
	r := KeyReport{Key: key, Nodes: len(holds), Quorum: quorum, PerNode: holds, MinTTLms: -2}
	count := map[string]int{}
	for _, h := range holds {
		if h.TTLms == -2 {
			continue
		}
		if h.Type == "" {
			count[h.Owner]++
		}
		if h.TTLms == -1 {
			r.NoTTL = true
		} else if r.MinTTLms == -2 || h.TTLms < r.MinTTLms {
			r.MinTTLms = h.TTLms
		}
	}
	for o, n := range count {
		if n > r.Held || n == r.Held && o < r.Owner {
			r.Owner, r.Held = o, n
		}
	}
	r.QuorumHeld = r.Held >= quorum
	r.Partial = !r.QuorumHeld
	r.Client, _ = admin.SplitOwner(r.Owner)
	return r
}

// printReports writes the plain locks' table, then the reentrant and
// read-write locks, then the semaphores.
func printReports(out io.Writer, reports []KeyReport) {
	if len(reports) == 0 {
		fmt.Fprintln(out, "no matching keys")
		return
	}
	var plain, typed, permits []KeyReport
	for _, r := range reports {
		switch r.Kind {
		case "":
			plain = append(plain, r)
		case "semaphore":
			permits = append(permits, r)
		default:
			typed = append(typed, r)
		}
	}
	sections := 0
	for _, s := range []struct {
		rs    []KeyReport
		print func(io.Writer, []KeyReport)
	}{{plain, printPlain}, {typed, printTyped}, {permits, printSemaphores}} {
		if len(s.rs) == 0 {
			continue
		}
		if sections++; sections > 1 {
			fmt.Fprintln(out)
		}
		s.print(out, s.rs)
	}
}

// printPlain writes the plain locks and the keys that are not locks.
func printPlain(out io.Writer, reports []KeyReport) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tCLIENT\tOWNER\tNODES\tHELD\tQUORUM\tMIN TTL\tFENCE\tFLAGS")
	for _, r := range reports {
		var nodes strings.Builder
		for _, h := range r.PerNode {
			switch {
			case h.Missing != "":
				nodes.WriteByte('?')
			case h.TTLms == -2:
				nodes.WriteByte('.')
			case h.Owner == r.Owner && h.Type == "":
				nodes.WriteByte('#')
			default:
				nodes.WriteByte('x') // another owner or a non-string key
			}
		}
		flags := flagsOf(r)
		ttl := "-"
		if r.MinTTLms >= 0 {
			ttl = (time.Duration(r.MinTTLms) * time.Millisecond).String()
		}
		quorum := "no"
		if r.QuorumHeld {
			quorum = "yes"
		}
		client, attempt := admin.SplitOwner(r.Owner)
		if client == "" {
			client = "-"
		}
		fence := "-"
		if r.Fence > 0 {
			fence = strconv.FormatInt(r.Fence, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\n", r.Key, client, attempt, nodes.String(), r.Held, r.Nodes, quorum, ttl, fence,
			strings.Join(flags, ","))
	}
	tw.Flush()
	fmt.Fprintln(out, "CLIENT: the holder's instance id (redlock.Client.ID, logged by that process); OWNER: the attempt's random part")
	fmt.Fprintln(out, "NODES: # holds the owner shown, x holds another owner or a non-lock value, . absent, ? node not reached")
	fmt.Fprintln(out, "FENCE: the highest fence register of the key (the latest fenced holder's token); - if never fenced")
	for _, r := range reports {
		if len(flagsOf(r)) > 0 {
			fmt.Fprintln(out, "FLAGS: PARTIAL held by fewer than a quorum (a leftover); NO-TTL never expires; UNKNOWN fewer than a quorum seen, but the nodes not reached could hold the rest")
			break
		}
	}
}

func unlockCmd(fs *flag.FlagSet) runner {
	nodes := nodeFlags(fs)
	force := fs.Bool("force", false, "really delete (required)")
	return func(pos []string, out, errOut io.Writer) error {
		if len(pos) != 1 || pos[0] == "" {
			return usageErr("unlock takes one KEY")
		}
		key := pos[0]
		urls, err := nodes.urls()
		if err != nil {
			return err
		}
		set, err := connectSome(urls)
		if err != nil {
			return err
		}
		defer set.close()
		if set.answered() == 0 {
			return noNode(set)
		}
		q := len(urls)/2 + 1
		ctx := context.Background()
		found := survey(ctx, set, key, *force, out)
		const left = "the key may remain there until its TTL runs out; run unlock again when they are back"
		if found == 0 {
			fmt.Fprintf(out, "%s is held on none of the %d nodes that answered: nothing to delete\n", key, set.answered())
			return reachVerdict(set, q, errOut, left)
		}
		if !*force {
			return usageErr("refusing to delete without --force (%d nodes hold %s)", found, key)
		}
		deleted := 0
		for i, c := range set.clients {
			if c == nil {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			n, err := c.Del(cctx, key).Result()
			cancel()
			if err != nil {
				fmt.Fprintf(out, "%s: DEL failed: %s\n", set.shown[i], explain(err))
				set.drop(i, err)
				continue
			}
			deleted += int(n)
		}
		fmt.Fprintf(out, "deleted %s on %d of %d nodes\n", key, deleted, len(urls))
		return reachVerdict(set, q, errOut, left)
	}
}

// survey prints what each node of set holds for key (the owner value and
// TTL, or absent; nodes not reached as such) and returns how many hold
// it. A node that fails is dropped from set.
func survey(ctx context.Context, set *nodeSet, key string, force bool, out io.Writer) int {
	verb := "would delete"
	if force {
		verb = "deleting"
	}
	found := 0
	for i, c := range set.clients {
		if c == nil {
			fmt.Fprintf(out, "%s: not reached (%s)\n", set.shown[i], set.missing[i])
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		v, err := c.Get(cctx, key).Result()
		ttl, _ := c.PTTL(cctx, key).Result()
		cancel()
		switch {
		case errors.Is(err, redis.Nil):
			fmt.Fprintf(out, "%s: %s absent\n", set.shown[i], key)
			continue
		case err != nil && strings.Contains(err.Error(), "WRONGTYPE"):
			v = "(not a string: a typed lock or other data)"
		case err != nil:
			fmt.Fprintf(out, "%s: not reached (%s)\n", set.shown[i], explain(err))
			set.drop(i, err)
			continue
		}
		found++
		fmt.Fprintf(out, "%s: %s %s (owner %q, %s)\n", set.shown[i], verb, key, v, ttlText(ttl))
	}
	return found
}

// ttlText shows a PTTL result: "ttl 1.5s", or "no ttl" for a key that
// never expires.
func ttlText(d time.Duration) string {
	if d < 0 {
		return "no ttl"
	}
	return "ttl " + d.String()
}
