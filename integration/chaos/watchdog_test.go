package chaos

import (
	"context"
	"testing"
	"time"
)

// watchdogScenarios are the watchdog workload's scenarios (see
// watchdog.go); short mode keeps those marked short. Every lock is taken
// with a 600 ms lease renewed every 200 ms and held 600-1200 ms, so a hold
// outlives its lease only through renewals; the scenario fails if no
// renewal succeeded or no hold outlived its lease.
func watchdogScenarios() []struct {
	short bool
	s     Scenario
} {
	base := Scenario{Clients: 11, Procs: 1, Keys: 6, TTL: 600 * ms, Lease: 600 * ms, Every: 200 * ms,
		HoldMin: 600 * ms, Hold: 1200 * ms, Duration: 8 * time.Second, Persist: true,
		GapMin: 100 * ms, GapMax: 400 * ms, DurMin: 100 * ms, DurMax: 700 * ms}
	with := func(f func(*Scenario)) Scenario { s := base; f(&s); return s }
	all := []Scenario{
		// The nemesis of nemesis-mixed.
		with(func(s *Scenario) {
			s.Name = "watchdog-nemesis-mixed"
			s.Faults = []string{FKill, FPause, FRestart, FLatency, FBlackhole, FDropReplies, FReset, FPartition, FIsolate}
		}),
		// Each client group reaches three nodes, the middle one (node 2)
		// shared, and node 2 is killed for 0.7-1.2 s at a time, longer
		// than a lease: while it is down no client reaches a quorum,
		// renewals fail, and every lock whose hold goes on past its
		// deadline is lost while held (Done fires at the deadline, the
		// holder stops). With persistence node 2 comes back with the TTLs
		// of the last renewals it took.
		with(func(s *Scenario) {
			s.Name = "watchdog-quorum-loss"
			s.Static, s.Faults, s.Targets, s.WantLosses = FPartition, []string{FKill}, []int{2}, true
			s.GapMin, s.GapMax, s.DurMin, s.DurMax = 300*ms, 800*ms, 700*ms, 1200*ms
		}),
		// Each client group reaches three nodes, the middle one (node 2)
		// shared; node 2 restarts every 0.7-1.5 s. With appendfsync
		// always it keeps the locks and the renewals' new TTLs.
		with(func(s *Scenario) {
			s.Name = "watchdog-restart-fsync-always"
			s.Static, s.Faults, s.Targets = FPartition, []string{FRestart}, []int{2}
			s.GapMin, s.GapMax = 700*ms, 1500*ms
		}),
		// Outside the model: node 2 restarts empty, the holder's side can
		// no longer renew, and the other side gets the lock before the
		// holder's deadline (the last renewal's).
		with(func(s *Scenario) {
			s.Name = "sanity-watchdog-restart-no-persistence"
			s.Sanity, s.Persist = "overlap", false
			s.Static, s.Faults, s.Targets = FPartition, []string{FRestart}, []int{2}
			s.GapMin, s.GapMax = 700*ms, 1500*ms
		}),
	}
	short := map[string]bool{"watchdog-nemesis-mixed": true}
	var out []struct {
		short bool
		s     Scenario
	}
	for _, s := range all {
		if !full() {
			s.Duration = 5 * time.Second
		}
		out = append(out, struct {
			short bool
			s     Scenario
		}{short[s.Name], s})
	}
	return out
}

func TestChaosWatchdog(t *testing.T) {
	for i, sc := range watchdogScenarios() {
		if !full() && !sc.short {
			continue
		}
		t.Run(sc.s.Name, func(t *testing.T) {
			c := procCluster(t, 5, sc.s.Persist)
			seed := seedFor(100 + i)
			t.Logf("seed %d (replay: CHAOS_SEED=%d)", seed, seed)
			r, err := Execute(context.Background(), sc.s, c, seed, helperArgv(), t.Logf)
			if err != nil {
				t.Error(err)
			}
			record(t, r)
			t.Logf("%s: lease %v renewed every %v: %d renewals, %d holds past the lease, %d lost while held, %d increments written",
				r.Scenario, r.Lease, r.Every, r.Renewals, r.PastLease, r.Losses, r.Wrote)
		})
	}
}
