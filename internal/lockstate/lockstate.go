// Package lockstate is a Lock's life as data: its phases, the events that
// move it, and the one table that says where each event leads. The Lock
// stores its phase and changes it only through Next, so a transition the
// table does not list cannot happen unseen.
package lockstate

import "fmt"

// Phase is where a Lock is in its life.
type Phase uint8

const (
	Held      Phase = iota // held, no extension in flight
	Extending              // one extension in flight; others queue behind it
	Releasing              // Release was called: no extension starts; the one in flight settles
	Ended                  // released or lost
	Passed                 // released, and its hold handed to a successor Lock of this Client
	phases
)

func (p Phase) String() string {
	return [...]string{"held", "extending", "releasing", "ended", "passed", "?"}[min(p, phases)]
}

// Event is what happens to a Lock.
type Event uint8

const (
	Extend  Event = iota // an extension (Extend or a watchdog renewal) gets the turn
	Settle               // the extension in flight settled; no other waits for the turn
	HandOn               // the extension in flight settled and hands the turn to the next one queued
	Release              // Release is called
	End                  // the Lock ends: released, or lost (its validity ran out, a quorum no longer holds it)
	Pass                 // the released Lock's hold went to a successor
	events
)

func (e Event) String() string {
	return [...]string{"extend", "settle", "hand-on", "release", "end", "pass", "?"}[min(e, events)]
}

// Row is one transition: in phase From, event On leads to phase To.
type Row struct {
	From Phase
	On   Event
	To   Phase
	Why  string
}

// rows is the table. Any (phase, event) it does not list is a bug.
var rows = [...]Row{
	{Held, Extend, Extending, "one extension at a time"},
	{Extending, Settle, Held, "the deadline moved, or stayed where the extension pulled it in"},
	{Extending, HandOn, Extending, "the next extension queued, in call order, takes the turn"},
	{Held, Release, Releasing, "Release goes on at once"},
	{Extending, Release, Releasing, "no extension starts after this; Release waits for the one in flight"},
	{Releasing, Settle, Releasing, "the extension Release waited for settled: Release goes on"},
	{Held, End, Ended, "lost: the deadline passed, or a quorum no longer holds it"},
	{Extending, End, Ended, "lost while an extension was in flight (it settles on an ended Lock)"},
	{Releasing, End, Ended, "released (or found lost while releasing)"},
	{Ended, Settle, Ended, "an extension in flight when the Lock was lost settled: nothing changes"},
	{Ended, Pass, Passed, "the hold went to a successor Lock: nothing is deleted on the nodes"},
}

// table[from][on] is the phase after on in from, plus one; 0: no such row.
var table = func() (t [phases][events]Phase) {
	for _, r := range rows {
		if t[r.From][r.On] != 0 {
			panic(fmt.Sprintf("lockstate: two rows for %v on %v", r.From, r.On))
		}
		t[r.From][r.On] = r.To + 1
	}
	return t
}()

// Next returns the phase that event e leads to from phase p, and false if
// the table has no such transition.
func Next(p Phase, e Event) (Phase, bool) {
	if p >= phases || e >= events || table[p][e] == 0 {
		return p, false
	}
	return table[p][e] - 1, true
}

// Rows returns the table's rows, in order.
func Rows() []Row { return append([]Row(nil), rows[:]...) }
