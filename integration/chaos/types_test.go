package chaos

import (
	"context"
	"testing"
	"time"
)

// typesScenario is the typed workload under the mixed nemesis of
// nemesis-mixed: nodes with persistence, every fault the harness offers,
// six clients in two groups and one helper process on one key of each
// type, semaphores of 2 permits. A hold of up to 10 ms lets readers meet
// and the permits fill.
func typesScenario() Scenario {
	s := Scenario{Name: "types-nemesis-mixed", Clients: 6, Procs: 1, Keys: 1, TTL: 500 * ms, Hold: 10 * ms,
		Duration: 8 * time.Second, Persist: true, Permits: 2,
		GapMin: 100 * ms, GapMax: 400 * ms, DurMin: 100 * ms, DurMax: 700 * ms,
		Faults: []string{FKill, FPause, FRestart, FLatency, FBlackhole, FDropReplies, FReset, FPartition, FIsolate}}
	if full() {
		s.Duration = 20 * time.Second
	}
	return s
}

// TestChaosTypes fails on any violation of a type's guarantee. How many
// locks a loaded machine gets is no verdict: it needs only one.
func TestChaosTypes(t *testing.T) {
	s := typesScenario()
	c := procCluster(t, 5, s.Persist)
	seed := seedFor(100)
	t.Logf("seed %d (replay: CHAOS_SEED=%d)", seed, seed)
	r, err := ExecuteTyped(context.Background(), s, c, seed, helperArgv(), t.Logf)
	if err != nil {
		t.Error(err)
	}
	t.Log(r)
	for _, e := range r.Examples {
		t.Logf("  %s", e)
	}
	for _, k := range []string{kindRead, kindWrite, kindSemaphore, kindReentrant} {
		if r.Kinds[k] == 0 {
			t.Logf("no %s acquisition: its checker saw nothing this run", k)
		}
	}
	switch {
	case r.Acquisitions() == 0:
		t.Errorf("%s: no acquisitions (nothing checked)", s.Name)
	case r.Violations() > 0:
		t.Errorf("%s (seed %d, replay with CHAOS_SEED=%d): %d violations", s.Name, seed, seed, r.Violations())
	}
}
