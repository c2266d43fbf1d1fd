// Package trust decides, per node, whether a node's vote counts: the one
// place where what a Client learned about a node's process and data turns
// into a window during which the node does not vote.
//
// A node may have lost lock keys when its process changed (a restart, a
// replacement at its address, a promoted replica) or when it evicted keys.
// Such a node does not vote for anyone while a lock it may have lost can
// still be held. Every change of a Node goes through Learn (an identity
// read), Resolve (what the other nodes' TTL registers showed) or Lengthen
// (a floor turned on); each is a pure function of the Node, the event and
// the time, so a test can drive any sequence of them without servers (see
// the model test in this package).
//
// The rules (SAFETY.md, "Node trust"):
//
//   - T1 evidence, not configuration: a new process votes at once only on
//     evidence that it holds every write the old one acknowledged: it runs
//     appendonly yes, its data carries the old process's stamp (it loaded
//     the old one's append-only file, see node.Register.Loaded), it was
//     not promoted from a replica, the old one fed no replica (a replica's
//     copy carries the stamp too), neither may evict (an eviction this
//     Client did not see dies with the old process's count), and the old
//     and new processes both ran appendfsync always (every acknowledged write was on disk). With
//     the stamp alone (appendfsync everysec) only the votes confirmed on
//     disk (durable votes) are kept. appendfsync always without the stamp
//     proves nothing: the disk may be new.
//   - T2 a window never shortens while unproven: it ends at its own end or
//     at a proof. Continuity evidence of a suspicion that begins while
//     another is open is void unless the open one had such evidence too
//     (it shows only that nothing was lost since the intermediate process,
//     not since the one before it); without evidence, the new suspicion is
//     proved from its own, later base, which covers the earlier loss; with
//     it, the open window's end is its floor.
//   - T3 another server: a process already older than the window, or one
//     promoted in its current life (also when first met), never saw the
//     writes the old one acknowledged; its window counts from now.
//   - T4 eviction is a loss: a change of the node's evicted_keys since it
//     was last trusted (the guard compares it on every grant), or
//     evictions of a process this Client did not watch (first met, or new
//     after a restart), begin a window from now, as a restart with nothing
//     loaded does.
//   - T5 a witness vouches for its register only while it runs the process
//     this Client trusted, with the eviction count it trusted, outside any
//     window of its own.
package trust

import (
	"time"

	"github.com/redlock-go/redlock/observe"
)

// Proc is what a node said about its process and data in one identity read.
type Proc struct {
	RunID    string
	Uptime   time.Duration
	AOF      bool // appendonly yes
	Fsync    bool // appendfsync always
	Promoted bool // promoted from replica in its current life
	// Replicated: the process fed a replica lately (its backlog is live)
	// or has one: a copy of its data, its stamp included, may be promoted
	// and restarted elsewhere, so its stamp proves nothing after it.
	Replicated bool
	Evicts     bool  // maxmemory set with a policy that can evict a key with a TTL
	Evicted    int64 // evicted_keys
}

// Seen is the event of an identity read.
type Seen struct {
	Proc    Proc
	Loaded  bool          // the node's own register shows it loaded the data of the process known before (node.Register.Loaded)
	Now     time.Time     // when it was read, on the Client's clock
	Window  time.Duration // the fallback window now; <= 0: trust is off
	Created time.Time     // the Client's creation
	Fresh   bool          // strict mode: a node first met young is suspect
}

// Verdict is what Learn decided.
type Verdict struct {
	Suspect bool      // discounted until Resolve: read the other nodes' registers
	Changed bool      // a process other than the one known before
	Kept    bool      // durable entries may be left out of the proof (see Prove)
	Epoch   uint64    // the suspicion's number, for Resolve
	Until   time.Time // provisional end (the fallback); zero if none
}

// Node is one node's trust state. The zero Node knows nothing yet. It is not
// safe for concurrent use: its owner serializes the events.
type Node struct {
	Proc    Proc      // last learned; RunID "" = never
	Base    time.Time // latest time the loss may have happened (a window counts from here)
	Until   time.Time // no vote before this (zero: none)
	Floor   time.Time // the end of the windows open when the current suspicion began (T2)
	Pending bool      // suspect, the registers not read yet: discounted meanwhile
	Kept    bool      // the current suspicion came with continuity evidence (Verdict.Kept)
	Epoch   uint64    // suspicions begun: a resolution of an older one is dropped
	Reason  string
	Bound   string    // observe.Bound* that set the latest window
	Last    time.Time // the latest window's end (kept after it is over)
}

// Open reports whether a window or a suspicion is open at now.
func (n *Node) Open(now time.Time) bool { return n.Pending || now.Before(n.Until) }

// Learn applies an identity read and returns what it means.
func (n *Node) Learn(e Seen) Verdict {
	prev, p, now, w := n.Proc, e.Proc, e.Now, e.Window
	n.Proc = p
	if w <= 0 || prev.RunID == p.RunID && prev.Evicted == p.Evicted {
		return Verdict{}
	}
	open := n.Open(now)
	v := Verdict{Changed: prev.RunID != "" && prev.RunID != p.RunID}
	// INFO's uptime is the difference of two whole-second readings: the
	// process may be up to a second younger than it says.
	reason, base := "restart observed", now.Add(min(time.Second-p.Uptime, 0))
	// T1: no evidence from a node that may evict (an eviction the Client
	// did not see died with the old process's count). T2: evidence of
	// continuity holds across an open window only if that window too lost
	// nothing it could not prove.
	loaded := e.Loaded && p.AOF && !p.Promoted && !prev.Replicated && !prev.Evicts && !p.Evicts && (!open || n.Kept)
	switch {
	case prev.RunID == p.RunID: // T4: same process, keys evicted
		reason, base = "keys evicted", now
	case prev.RunID == "" && p.Promoted: // T3 on first contact
		reason, base = "a promoted replica, first met (fail-over?)", now
	case p.Evicted > 0: // T4: evictions of a process this Client did not watch, until now
		reason, base = "evicted keys this Client did not see", now
	case prev.RunID == "" && now.Sub(e.Created) > p.Uptime+time.Second:
		reason = "started after this Client"
	case prev.RunID == "" && e.Fresh && p.Uptime < w:
		reason = "fresh start"
	case prev.RunID == "":
		return v
	case p.Uptime >= w || p.Promoted: // T3
		reason, base = "another server at this address (fail-over?)", now
	case loaded && prev.Fsync && p.Fsync: // T1: every acknowledged write loaded
		return v
	default:
		v.Kept = loaded
	}
	return n.suspect(v, reason, base, now, w)
}

// suspect begins a suspicion of the node, lost at base.
func (n *Node) suspect(v Verdict, reason string, base, now time.Time, w time.Duration) Verdict {
	switch {
	case !n.Open(now) || !v.Kept:
		// Proved (or fallen back) from its own, later base, a suspicion
		// without evidence covers every loss before it: an open window
		// ends at that proof or at its own end.
		n.Floor = time.Time{}
	case n.Pending:
		// Kept after kept: the later proof covers the pending one's.
	default: // T2: a kept proof leaves durable entries out; the window stays
		n.Floor = maxTime(n.Floor, n.Until)
	}
	n.Kept = v.Kept
	n.Epoch++
	v.Suspect, v.Epoch = true, n.Epoch
	n.Base, n.Reason, n.Pending, n.Bound = base, reason, true, ""
	n.Until = maxTime(n.Floor, base.Add(w))
	if !n.Until.After(now) {
		n.Until = time.Time{}
	}
	v.Until, n.Last = n.Until, n.Until
	return v
}

// Resolution is what the other nodes' TTL registers showed for a suspicion.
type Resolution struct {
	Epoch    uint64
	Proven   bool          // the registers showed a window (Prove)
	Until    time.Time     // that window's end
	Proof    string        // the bound of a proven window
	Fallback time.Duration // the window where none is proven, from Base
	FBBound  string        // its bound
	Floor    bool          // no window shorter than the fallback
	Now      time.Time
}

// Resolve ends suspicion r.Epoch with what the registers showed. It
// returns the window's end, its bound and whether it took effect (false for
// an epoch no longer current, a window already shown, or a fallback already
// set). A later Resolve of the same epoch may shorten a fallback to a proof,
// never below the floor (T2).
func (n *Node) Resolve(r Resolution) (time.Time, string, bool) {
	if n.Epoch != r.Epoch || !n.Pending && Shown(n.Bound) {
		return time.Time{}, "", false
	}
	fallback := n.Base.Add(r.Fallback)
	until, bound := r.Until, r.Proof
	if !r.Proven || r.Floor && until.Before(fallback) {
		if !n.Pending { // already on the fallback
			return n.Until, n.Bound, false
		}
		until, bound = fallback, r.FBBound
	}
	until = maxTime(until, n.Floor)
	if !until.After(r.Now) {
		until = r.Now
	}
	n.Pending, n.Until, n.Bound, n.Last = false, until, bound, until
	return until, bound, true
}

// Current reports whether epoch is still the latest suspicion and its
// window has not been shown by the registers yet.
func (n *Node) Current(epoch uint64) bool { return n.Epoch == epoch && !Shown(n.Bound) }

// Shown reports whether bound is a window shown by the registers, which a
// later read does not change.
func Shown(bound string) bool { return bound == observe.BoundRegister || bound == observe.BoundDurable }

// Witness reports whether the node, whose process p was read just now,
// can vouch for its TTL register (T5). window is the fallback window.
func (n *Node) Witness(p Proc, now, created time.Time, fresh bool, window time.Duration) bool {
	known := n.Proc
	switch {
	case n.Open(now):
		return false
	case n.Bound == observe.BoundDurable && now.Before(n.Base.Add(window)):
		// Kept its durable votes only: a plain entry published shortly
		// before its crash may be missing.
		return false
	case known.RunID == "":
		return now.Sub(created) <= p.Uptime+time.Second && !(fresh && p.Uptime < window) && !p.Promoted && p.Evicted == 0
	}
	return known.RunID == p.RunID && known.Evicted == p.Evicted
}

// Lengthen makes a window that the registers set end no sooner than the
// fallback fb after its base (QuarantineSettingFloor turned on); also a
// window already over, while that end is ahead. It reports whether it did.
func (n *Node) Lengthen(fb time.Duration, bound string, now time.Time) bool {
	if n.Pending || n.Bound != observe.BoundRegister || n.Base.IsZero() {
		return false
	}
	u := n.Base.Add(fb)
	if !u.After(now) || !u.After(n.Until) {
		return false
	}
	n.Until, n.Last, n.Bound = u, u, bound
	return true
}

// Counts reports whether the node's vote counts at now: not while a
// suspicion is pending or a window is open. ended is set when a window was
// found over (and cleared): the node counts again.
func (n *Node) Counts(now time.Time) (ok, ended bool) {
	if n.Open(now) {
		return false, false
	}
	ended = !n.Until.IsZero()
	n.Until, n.Floor = time.Time{}, time.Time{}
	return true, ended
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
