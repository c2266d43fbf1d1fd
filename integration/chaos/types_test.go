package chaos

import (
	"context"
	"testing"
	"time"
)

// typesScenarios are the typed workload, six clients in two groups and
// one helper process on one key of each type, semaphores of 2 permits,
// under two nemeses: nemesis-mixed's (every fault the harness offers) and
// restart-fsync-always's (node 2, which every client needs behind the
// static partition, restarted with persistence again and again: the
// typed locks' hashes must survive it as plain keys do).
func typesScenarios() []Scenario {
	base := Scenario{Clients: 6, Procs: 1, Keys: 1, TTL: 500 * ms, Duration: 8 * time.Second, Persist: true, Permits: 2,
		GapMin: 100 * ms, GapMax: 400 * ms, DurMin: 100 * ms, DurMax: 700 * ms}
	mixed, restart := base, base
	// A hold of up to 10 ms lets readers meet and the permits fill.
	mixed.Name, mixed.Hold = "types-nemesis-mixed", 10*ms
	mixed.Faults = []string{FKill, FPause, FRestart, FLatency, FBlackhole, FDropReplies, FReset, FPartition, FIsolate}
	// Longer holds, so that restarts come while locks are held; short
	// enough that a reentrant hold's pauses fit in its TTL.
	restart.Name, restart.Hold, restart.Duration = "types-restart-fsync-always", 80*ms, 5*time.Second
	restart.Static, restart.Faults, restart.Targets = FPartition, []string{FRestart}, []int{2}
	restart.GapMin, restart.GapMax = 30*ms, 100*ms
	out := []Scenario{mixed, restart}
	for i := range out {
		if full() {
			out[i].Duration = 20 * time.Second
		}
	}
	return out
}

// typedResults are TestChaosTypes's rows of the results table (under
// resMu).
var typedResults []TypedResult

// TestChaosTypes fails on any violation of a type's guarantee. How many
// locks a loaded machine gets is no verdict: it needs only one.
func TestChaosTypes(t *testing.T) {
	for i, s := range typesScenarios() {
		t.Run(s.Name, func(t *testing.T) {
			c := procCluster(t, 5, s.Persist)
			seed := seedFor(100 + i)
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
			resMu.Lock()
			typedResults = append(typedResults, r)
			resMu.Unlock()
			if v := r.Verdict(); v != "ok" {
				t.Errorf("%s (seed %d, replay with CHAOS_SEED=%d): %s", s.Name, seed, seed, v)
			}
		})
	}
}
