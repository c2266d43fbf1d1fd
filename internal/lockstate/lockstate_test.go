package lockstate

import "testing"

// Every row is reachable through Next, and every pair the table does not
// list is refused and leaves the phase as it was.
func TestNextFollowsTheTable(t *testing.T) {
	listed := map[[2]uint8]Phase{}
	for _, r := range Rows() {
		listed[[2]uint8{uint8(r.From), uint8(r.On)}] = r.To
	}
	for p := Phase(0); p < phases; p++ {
		for e := Event(0); e < events; e++ {
			got, ok := Next(p, e)
			want, in := listed[[2]uint8{uint8(p), uint8(e)}]
			switch {
			case in && (!ok || got != want):
				t.Errorf("%v on %v = %v, %v; the table says %v", p, e, got, ok, want)
			case !in && (ok || got != p):
				t.Errorf("%v on %v = %v, %v; not in the table: want refused, phase kept", p, e, got, ok)
			}
		}
	}
	if _, ok := Next(phases, Extend); ok {
		t.Error("an unknown phase moved")
	}
}

// An end is final: from an end phase only Release (refused as a repeat,
// in place), a late verdict on a lost Lock, and the pass of a released
// one are listed, and none leads back to a live phase.
func TestEndIsFinal(t *testing.T) {
	for p := Phase(0); p < phases; p++ {
		for e := Event(0); e < events; e++ {
			q, ok := Next(p, e)
			if ok && p.Over() && !q.Over() {
				t.Errorf("%v on %v came back to %v", p, e, q)
			}
		}
		if !p.Over() {
			continue
		}
		if q, ok := Next(p, Release); !ok || q != p && !(p == Lost && q == LostReleased) {
			t.Errorf("%v on release = %v, %v: want a repeat, in place", p, q, ok)
		}
	}
	if q, _ := Next(Released, Pass); q != Passed {
		t.Error("a released Lock does not pass")
	}
}

// Every live phase can be lost (a bug's loss takes that row), and loses
// into lost-released once Release was called; nothing ends the Lock as
// released but Release's end.
func TestLossAndRelease(t *testing.T) {
	for p := Phase(0); p < phases; p++ {
		q, ok := Next(p, Lose)
		switch {
		case p.Over() && ok:
			t.Errorf("%v was lost again", p)
		case !p.Over() && (!ok || q != Lost && q != LostReleased):
			t.Errorf("%v on lose = %v, %v", p, q, ok)
		case !p.Over() && (q == LostReleased) != p.ReleaseCalled():
			t.Errorf("%v on lose = %v: Release called %v", p, q, p.ReleaseCalled())
		}
	}
	for _, r := range Rows() {
		if r.To == Released && r.From != Released && r.On != End {
			t.Errorf("%v on %v ends as released", r.From, r.On)
		}
	}
}

// Only a confirmed round, or the lack of any, leaves a Lock sure: a
// verdict short of the quorum makes it unsure, and only a confirmation
// makes an unsure Lock sure again.
func TestUnsureOnlyConfirmClears(t *testing.T) {
	unsure := map[Phase]bool{HeldUnsure: true, ExtendingUnsure: true, ReleasingUnsure: true}
	for _, r := range Rows() {
		if r.To.Over() || r.From.Over() {
			continue
		}
		switch {
		case r.On == Doubt && !unsure[r.To]:
			t.Errorf("%v on doubt = %v: not unsure", r.From, r.To)
		case r.On == Confirm && unsure[r.To]:
			t.Errorf("%v on confirm = %v: still unsure", r.From, r.To)
		case r.On != Confirm && unsure[r.From] && !unsure[r.To]:
			t.Errorf("%v on %v = %v: sure without a confirmed round", r.From, r.On, r.To)
		}
	}
}
