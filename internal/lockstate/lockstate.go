// Package lockstate is a Lock's life as data: its phases, the events that
// move it, and the one table that says where each event leads. The Lock
// stores its phase and changes it only through Next, so a transition the
// table does not list cannot happen unseen.
//
// Whether the last round reached the quorum is part of the phase (the
// -unsure twins): only a Lock whose last round did may be handed on.
package lockstate

import "fmt"

// Phase is where a Lock is in its life.
type Phase uint8

const (
	Held            Phase = iota // held, no extension in flight; the last round reached the quorum
	HeldUnsure                   // held, but the last extension fell short of the quorum
	Extending                    // one extension in flight (from held); others queue behind it
	ExtendingUnsure              // one extension in flight (from held-unsure)
	Releasing                    // Release was called: no extension starts; the one in flight settles
	ReleasingUnsure              // releasing, and the last round fell short of the quorum: no hand-on
	Released                     // ended by Release
	Passed                       // released, and its hold handed to a successor Lock of this Client
	Lost                         // ended by a loss (or a bug: a transition off the table)
	LostReleased                 // lost, and Release was called (before or after the loss)
	phases
)

func (p Phase) String() string {
	return [...]string{"held", "held-unsure", "extending", "extending-unsure", "releasing",
		"releasing-unsure", "released", "passed", "lost", "lost-released", "?"}[min(p, phases)]
}

// Over reports whether p ends the Lock's life: nothing of it goes on.
func (p Phase) Over() bool { return p >= Released && p < phases }

// Extending reports whether an extension is in flight.
func (p Phase) Extending() bool { return p == Extending || p == ExtendingUnsure }

// Idle reports whether the Lock is held with no extension in flight.
func (p Phase) Idle() bool { return p == Held || p == HeldUnsure }

// Releasing reports whether Release was called and the Lock has not ended.
func (p Phase) Releasing() bool { return p == Releasing || p == ReleasingUnsure }

// ReleaseCalled reports whether Release was called: it is called once.
func (p Phase) ReleaseCalled() bool {
	return p.Releasing() || p == Released || p == Passed || p == LostReleased
}

// Event is what happens to a Lock.
type Event uint8

const (
	Extend  Event = iota // an extension (Extend or a watchdog renewal) gets the turn
	Confirm              // the extension in flight settled on the quorum
	Doubt                // the extension in flight settled short of the quorum
	Skip                 // the extension that had the turn sent nothing
	Release              // Release is called
	End                  // Release ends the Lock
	Lose                 // the Lock is lost: its validity ran out, a quorum no longer holds it, or a bug
	Pass                 // the released Lock's hold went to a successor
	events
)

func (e Event) String() string {
	return [...]string{"extend", "confirm", "doubt", "skip", "release", "end", "lose", "pass", "?"}[min(e, events)]
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
	{HeldUnsure, Extend, ExtendingUnsure, "one extension at a time"},

	{Extending, Confirm, Held, "the deadline moved"},
	{ExtendingUnsure, Confirm, Held, "the deadline moved: sure again"},
	{Releasing, Confirm, Releasing, "the extension Release waited for settled: Release goes on"},
	{ReleasingUnsure, Confirm, Releasing, "the extension Release waited for settled: it may hand on"},

	{Extending, Doubt, HeldUnsure, "the deadline stays where the extension pulled it in"},
	{ExtendingUnsure, Doubt, HeldUnsure, "as extending"},
	{Releasing, Doubt, ReleasingUnsure, "Release goes on, and deletes"},
	{ReleasingUnsure, Doubt, ReleasingUnsure, "Release goes on, and deletes"},
	{Lost, Doubt, Lost, "an extension in flight when the Lock was lost settled (a lost Lock is never confirmed)"},
	{LostReleased, Doubt, LostReleased, "as lost"},

	{Extending, Skip, Held, "nothing was sent: as before the turn"},
	{ExtendingUnsure, Skip, HeldUnsure, "nothing was sent: as before the turn"},
	{Releasing, Skip, Releasing, "the turn found the Lock releasing: Release goes on"},
	{ReleasingUnsure, Skip, ReleasingUnsure, "as releasing"},
	{Lost, Skip, Lost, "the turn found the Lock lost"},
	{LostReleased, Skip, LostReleased, "as lost"},

	{Held, Release, Releasing, "Release goes on at once"},
	{HeldUnsure, Release, ReleasingUnsure, "Release goes on at once"},
	{Extending, Release, Releasing, "no extension starts after this; Release waits for the one in flight"},
	{ExtendingUnsure, Release, ReleasingUnsure, "as extending"},
	{Lost, Release, LostReleased, "Release cleans up what the nodes may still hold"},
	{Releasing, Release, Releasing, "again: Release is called once"},
	{ReleasingUnsure, Release, ReleasingUnsure, "again"},
	{Released, Release, Released, "again"},
	{Passed, Release, Passed, "again"},
	{LostReleased, Release, LostReleased, "again"},

	{Releasing, End, Released, "released"},
	{ReleasingUnsure, End, Released, "released"},

	{Held, Lose, Lost, "the deadline passed, or a quorum no longer holds it"},
	{HeldUnsure, Lose, Lost, "as held"},
	{Extending, Lose, Lost, "lost while an extension was in flight (it settles on a lost Lock)"},
	{ExtendingUnsure, Lose, Lost, "as extending"},
	{Releasing, Lose, LostReleased, "found lost while releasing"},
	{ReleasingUnsure, Lose, LostReleased, "as releasing"},

	{Released, Pass, Passed, "the hold went to a successor Lock: nothing is deleted on the nodes"},
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
