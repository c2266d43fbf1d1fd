package trust

import "time"

// Entry is one live entry of a node's TTL register: a TTL in use, and how
// long the entry had left when it was read.
type Entry struct {
	TTL     time.Duration
	Left    time.Duration
	Durable bool // published by a Client with durable votes
}

// Read is what one other node answered when the registers were read for a
// suspect node.
type Read struct {
	Read    bool          // identity and register read
	Witness bool          // and the node can vouch for its register (Node.Witness)
	RunID   string        // its process
	Entries []Entry       // its register's live entries
	Legacy  time.Duration // the legacy key's TTL (never expires); 0 if absent
	At      time.Time     // the Client's clock when the answer came
}

// Prove is the rule (SAFETY.md, "Restart windows"): a node that lost its
// keys at base (a restart: the latest start INFO allows; an eviction: when
// it was seen) held only locks granted or lengthened before base, each on
// a quorum of at least n/2+1 nodes whose grant script itself made sure
// their register carried the lock's TTL in an entry outliving it. Any n -
// n/2 nodes include one of every such quorum; if that many distinct
// witnesses (Node.Witness) answered, every lock the node may have lost and
// that may still be held has its TTL d among their live entries, and ends
// by base + d and by that entry's expiry. The window ends at the latest of
// these caps over all entries read (base if there are none, drift budgets
// added by budget); proven is false when too few witnesses answered. For a
// node that kept its votes (Verdict.Kept), durable entries are left out:
// their locks' votes were confirmed on its disk before they counted.
func Prove(base time.Time, self string, n int, reads []Read, budget func(time.Duration) time.Duration, kept bool) (until time.Time, proven bool) {
	seen := map[string]bool{self: true} // one vote per server: an alias counts once
	until = base
	caps := func(r Read, d, left time.Duration, expires bool) {
		u := base.Add(d + budget(d))
		if e := r.At.Add(left + budget(left)); expires && e.Before(u) {
			u = e
		}
		until = maxTime(until, u)
	}
	for _, r := range reads {
		if !r.Witness || seen[r.RunID] {
			continue
		}
		seen[r.RunID] = true
		for _, e := range r.Entries {
			if !(kept && e.Durable) {
				caps(r, e.TTL, e.Left, true)
			}
		}
		if r.Legacy > 0 {
			caps(r, r.Legacy, 0, false)
		}
	}
	return until, len(seen)-1 >= n-n/2
}

// AllDurable reports whether the suspect node's own register (own) and
// every register read carry only durable entries: no lock granted without
// durable votes may still be held there. It stands in for the witnesses of
// a node that kept its votes when too few answered (a majority restarted
// together), under durable votes' assumption that every Client of the nodes
// uses them.
func AllDurable(own []Entry, ownLegacy time.Duration, reads []Read) bool {
	plain := func(es []Entry, legacy time.Duration) bool {
		for _, e := range es {
			if !e.Durable {
				return true
			}
		}
		return legacy > 0
	}
	if plain(own, ownLegacy) {
		return false
	}
	for _, r := range reads {
		if r.Read && plain(r.Entries, r.Legacy) {
			return false
		}
	}
	return true
}
