package trust

import (
	"testing"
	"time"

	"github.com/redlock-go/redlock/observe"
)

var t0 = time.Unix(1000, 0)

const w = 30 * time.Second

func seen(run string, now time.Time, loaded bool, mod func(*Proc)) Seen {
	p := Proc{RunID: run, Uptime: time.Second, AOF: true, Fsync: true}
	if mod != nil {
		mod(&p)
	}
	return Seen{Proc: p, Loaded: loaded, Now: now, Window: w, Created: t0}
}

// trusted returns a Node that knows process run (met at t0, old) and
// trusts it.
func trusted(run string, mod func(*Proc)) *Node {
	n := &Node{}
	s := seen(run, t0, false, mod)
	s.Proc.Uptime = time.Hour
	if v := n.Learn(s); v.Suspect {
		panic("an old process first met is suspect")
	}
	return n
}

func resolveProven(n *Node, v Verdict, until, now time.Time) time.Time {
	u, _, _ := n.Resolve(Resolution{Epoch: v.Epoch, Proven: true, Until: until, Proof: observe.BoundRegister,
		Fallback: w, FBBound: observe.BoundSetting, Now: now})
	return u
}

// T1: appendfsync always on both processes is no evidence without the
// stamp (a replacement with an empty disk); with it, no window.
func TestEvidenceNotConfiguration(t *testing.T) {
	n := trusted("a", nil)
	now := t0.Add(time.Minute)
	if v := n.Learn(seen("b", now, false, nil)); !v.Suspect || v.Kept {
		t.Fatalf("an always-fsync replacement without the stamp: %+v, want suspect, not kept", v)
	}
	n = trusted("a", nil)
	if v := n.Learn(seen("b", now, true, nil)); v.Suspect {
		t.Fatalf("an always-fsync restart that loaded the old file: %+v, want trusted", v)
	}
	n = trusted("a", func(p *Proc) { p.Fsync = false })
	if v := n.Learn(seen("b", now, true, func(p *Proc) { p.Fsync = false })); !v.Suspect || !v.Kept {
		t.Fatalf("an everysec restart that loaded the old file: %+v, want suspect and kept (durable votes only)", v)
	}
	n = trusted("a", func(p *Proc) { p.Replicated = true })
	if v := n.Learn(seen("b", now, true, nil)); !v.Suspect || v.Kept {
		t.Fatalf("a restart after a process that fed replicas: %+v, want suspect, not kept (the stamp may be a replica's copy)", v)
	}
}

// T2: a window never shortens while unproven: when the promoted process
// restarts with its own file inside the promotion's window, its stamp
// proves nothing about the process before it, and the window ends only at
// a proof or at its own end.
func TestWindowNeverShortens(t *testing.T) {
	n := trusted("a", nil)
	now := t0.Add(time.Minute)
	v := n.Learn(seen("b", now, false, func(p *Proc) { p.Promoted = true; p.Uptime = time.Hour }))
	if !v.Suspect || !v.Until.Equal(now.Add(w)) {
		t.Fatalf("promotion: %+v", v)
	}
	u := resolveProven(n, v, now.Add(20*time.Second), now)
	now = now.Add(time.Second)
	v = n.Learn(seen("c", now, true, nil)) // the promoted node restarted, loading its own file
	if !v.Suspect || v.Kept {
		t.Fatalf("restart of a promoted node inside its window: %+v, want suspect, not kept", v)
	}
	if ok, _ := n.Counts(now); ok {
		t.Fatal("counts before the registers were read for the restart")
	}
	// Unproven, it falls back from the later base: no sooner than the
	// first window's end (a proof from the later base may end it: it
	// covers every loss before that base).
	fb, _, _ := n.Resolve(Resolution{Epoch: v.Epoch, Fallback: w, FBBound: observe.BoundSetting, Now: now})
	if fb.Before(u) {
		t.Fatalf("window shortened from %v to %v without a proof", u, fb)
	}
	if ok, _ := n.Counts(fb.Add(-time.Millisecond)); ok {
		t.Fatal("counts before the window's end")
	}
	if ok, ended := n.Counts(fb); !ok || !ended {
		t.Fatal("does not count at the window's end")
	}
}

// T4: evictions are losses; a witness that evicted cannot vouch.
func TestEviction(t *testing.T) {
	ev := func(k int64) func(*Proc) {
		return func(p *Proc) { p.Uptime = time.Hour; p.Evicts = true; p.Evicted = k }
	}
	n := trusted("a", ev(0))
	now := t0.Add(time.Minute)
	p := Proc{RunID: "a"}
	ev(0)(&p)
	if !n.Witness(p, now, t0, false, w) {
		t.Fatal("a trusted node that evicted nothing since is no witness")
	}
	p.Evicted = 1
	if n.Witness(p, now, t0, false, w) {
		t.Fatal("a node that evicted since it was trusted vouches for its register")
	}
	v := n.Learn(Seen{Proc: p, Now: now, Window: w, Created: t0})
	if !v.Suspect || v.Kept || !n.Base.Equal(now) {
		t.Fatalf("eviction seen: %+v base %v, want suspect from now", v, n.Base)
	}
	// A first contact with a node that evicted before and may evict again.
	m := &Node{}
	if v := m.Learn(Seen{Proc: p, Now: now, Window: w, Created: t0}); !v.Suspect {
		t.Fatal("first contact with a node that evicted keys: trusted")
	}
	p.Evicts = false // noeviction now: it may have evicted a held lock's key just before the change
	m = &Node{}
	if v := m.Learn(Seen{Proc: p, Now: now, Window: w, Created: t0}); !v.Suspect || !m.Base.Equal(now) {
		t.Fatal("first contact with a node that evicted keys, under noeviction now: trusted")
	}
	// A restart that loaded the old file of a node that may evict: no
	// evidence (an eviction this Client did not see died with the old
	// count), nor once the new process evicted.
	n = trusted("a", ev(0))
	if v := n.Learn(seen("b", now, true, ev(0))); !v.Suspect || v.Kept {
		t.Fatalf("restart of an evicting node with the stamp: %+v, want suspect, not kept", v)
	}
	// A promoted replica first met: a fail-over this Client did not see.
	m = &Node{}
	q := Proc{RunID: "r", Uptime: time.Hour, Promoted: true}
	if v := m.Learn(Seen{Proc: q, Now: now, Window: w, Created: t0}); !v.Suspect {
		t.Fatal("a promoted replica first met: trusted")
	}
	if (&Node{}).Witness(q, now, t0, false, w) {
		t.Fatal("a promoted replica first met vouches for its register")
	}
}

// A resolution of an older suspicion is dropped; a fallback is kept until
// a proof, which may shorten it, but not below the floor.
func TestResolveEpochs(t *testing.T) {
	n := trusted("a", nil)
	now := t0.Add(time.Minute)
	v1 := n.Learn(seen("b", now, false, nil))
	v2 := n.Learn(seen("c", now.Add(time.Second), false, nil))
	if _, _, ok := n.Resolve(Resolution{Epoch: v1.Epoch, Proven: true, Until: now, Now: now}); ok {
		t.Fatal("an older epoch's resolution took effect")
	}
	fb, _, ok := n.Resolve(Resolution{Epoch: v2.Epoch, Fallback: w, FBBound: observe.BoundSetting, Now: now})
	if !ok || fb.Before(v1.Until) {
		t.Fatalf("fallback %v ok %v, want at least the first suspicion's %v", fb, ok, v1.Until)
	}
}

// T2 with an unbroken chain: a restart that loaded the file of a process
// that had itself loaded its predecessor's keeps its evidence while the
// first suspicion is still pending; after a lossy event it does not.
func TestKeptChain(t *testing.T) {
	everysec := func(p *Proc) { p.Fsync = false }
	n := trusted("a", everysec)
	now := t0.Add(time.Minute)
	v1 := n.Learn(seen("b", now, true, everysec))
	v2 := n.Learn(seen("c", now.Add(time.Second), true, everysec))
	if !v1.Kept || !v2.Kept {
		t.Fatalf("two restarts, each loading the one before's file: kept %v, %v; want both", v1.Kept, v2.Kept)
	}
	if !n.Floor.IsZero() {
		t.Fatalf("a floor %v from a pending suspicion that lost nothing", n.Floor)
	}
	n.Learn(seen("d", now.Add(2*time.Second), false, everysec)) // its file lost
	if v := n.Learn(seen("e", now.Add(3*time.Second), true, everysec)); v.Kept {
		t.Fatal("evidence kept across an open window of a restart that lost its file")
	}
}
