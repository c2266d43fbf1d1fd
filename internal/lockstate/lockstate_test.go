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

// The last phases are final: nothing leaves passed, and ended leads only
// to passed (or stays on a late settle).
func TestEndIsFinal(t *testing.T) {
	for e := Event(0); e < events; e++ {
		if p, ok := Next(Passed, e); ok {
			t.Errorf("passed on %v moved to %v", e, p)
		}
		if p, ok := Next(Ended, e); ok && p != Passed && p != Ended {
			t.Errorf("ended on %v moved to %v", e, p)
		}
	}
}
