package trust

import (
	"testing"
	"time"
)

func budget(d time.Duration) time.Duration {
	return time.Duration(float64(d)*0.01) + 2*time.Millisecond
}

// Any n - n/2 witnesses include one node of every quorum that may hold a
// lock (3 of 5: every quorum of 3 includes one of them); each entry counts
// until the node's loss plus its TTL, capped by its own expiry.
func TestProve(t *testing.T) {
	base := time.Unix(1000, 0)
	at := base.Add(100 * time.Millisecond)
	w := func(run string, es ...Entry) Read {
		return Read{Read: true, Witness: true, RunID: run, Entries: es, At: at}
	}
	short := Entry{TTL: 400 * time.Millisecond, Left: time.Second}
	until, ok := Prove(base, "a", 5, []Read{{}, w("b", short), w("c"), w("d"), {}}, budget, false)
	if want := base.Add(400*time.Millisecond + budget(400*time.Millisecond)); !ok || !until.Equal(want) {
		t.Fatalf("3 witnesses of 5: %v %v, want %v proven", until, ok, want)
	}
	if _, ok := Prove(base, "a", 5, []Read{{}, w("b", short), w("c"), {}, {}}, budget, false); ok {
		t.Error("2 witnesses of 5: proven")
	}
	if _, ok := Prove(base, "a", 5, []Read{{}, w("b"), w("b"), w("c"), {}}, budget, false); ok {
		t.Error("an alias counted as a second witness")
	}
	if _, ok := Prove(base, "a", 5, []Read{{}, w("a"), w("b"), w("c"), {}}, budget, false); ok {
		t.Error("the suspect node's alias counted as a witness")
	}
	long := Entry{TTL: 23 * time.Hour, Left: 2 * time.Second}
	until, ok = Prove(base, "a", 5, []Read{{}, w("b", short, long), w("c"), w("d"), {}}, budget, false)
	if want := at.Add(2*time.Second + budget(2*time.Second)); !ok || !until.Equal(want) {
		t.Fatalf("23h entry with 2 s left: %v %v, want %v", until, ok, want)
	}
	legacy := w("c")
	legacy.Legacy = time.Minute
	until, _ = Prove(base, "a", 5, []Read{{}, w("b"), legacy, w("d"), {}}, budget, false)
	if want := base.Add(time.Minute + budget(time.Minute)); !until.Equal(want) {
		t.Fatalf("legacy register: %v, want %v", until, want)
	}
	if _, ok := Prove(base, "a", 4, []Read{{}, w("b"), w("c"), {}}, budget, false); !ok {
		t.Error("2 witnesses of 4: not proven")
	}
}

// A node that kept its votes lost none of the durable ones: only the
// entries of Clients without durable votes set its window. Without the
// witnesses, AllDurable stands in only when no register read shows such
// an entry (or the legacy register).
func TestKeptVotes(t *testing.T) {
	base := time.Unix(1000, 0)
	at := base.Add(100 * time.Millisecond)
	w := func(run string, es ...Entry) Read {
		return Read{Read: true, Witness: true, RunID: run, Entries: es, At: at}
	}
	durable := Entry{TTL: time.Hour, Left: time.Hour, Durable: true}
	plain := Entry{TTL: 400 * time.Millisecond, Left: time.Second}
	reads := []Read{{}, w("b", durable), w("c", durable, plain), w("d"), {}}
	if until, ok := Prove(base, "a", 5, reads, budget, false); !ok || until.Before(base.Add(time.Hour)) {
		t.Fatalf("not kept: %v %v, want the durable entry's hour", until, ok)
	}
	until, ok := Prove(base, "a", 5, reads, budget, true)
	if want := base.Add(400*time.Millisecond + budget(400*time.Millisecond)); !ok || !until.Equal(want) {
		t.Fatalf("kept: %v %v, want %v (the plain entry only)", until, ok, want)
	}
	if AllDurable(nil, 0, reads) {
		t.Error("AllDurable with a plain entry on a witness")
	}
	reads[2] = w("c", durable)
	if !AllDurable([]Entry{durable}, 0, reads) {
		t.Error("AllDurable false with durable entries only")
	}
	if AllDurable([]Entry{plain}, 0, reads) {
		t.Error("AllDurable with a plain entry in the node's own register")
	}
	notWitness := w("e", plain)
	notWitness.Witness = false
	if AllDurable(nil, 0, append(reads, notWitness)) {
		t.Error("AllDurable ignored a plain entry of a node that is not a witness")
	}
	legacy := w("f")
	legacy.Legacy = time.Minute
	if AllDurable(nil, 0, append(reads, legacy)) {
		t.Error("AllDurable with the legacy register")
	}
}
