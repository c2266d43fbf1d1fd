package trust_test

import "time"

// The schedules kept: for each reverted rule, one that double-grants with
// the rule reverted and is safe with it (TestModelRegressions); for each
// double grant found with the rules in place, its minimal schedule
// (TestModelFindings). Written out by hand from what the search found
// (-trust.seed, then shrunk), so that they read as a story: Client 0 (A)
// takes k0 on nodes 0 and 1 while cut off from node 2, node 0 loses it,
// and Client 1 (B) takes k0 on nodes 0 and 2.

// regression is a schedule and the rule set under which it double-grants.
type regression struct {
	name string
	v    variant
	sc   schedule
}

// three is three nodes with appendonly aof and two Clients (created 10 s
// before time 0), every clock at rate 1; edit sets the rest.
func three(aof int, edit func(*config)) config {
	c := config{AOF: []int{aof, aof, aof}, Evicts: make([]bool, 3), Replica: make([]bool, 3), Stamped: make([]bool, 3),
		Up: []time.Duration{time.Hour, time.Hour, time.Hour}, NodeClk: []clock{{1e6 * time.Second, 1}, {2e6 * time.Second, 1}, {3e6 * time.Second, 1}},
		ClientClk: []clock{{4000 * time.Second, 1}, {5000 * time.Second, 1}}, Durable: make([]bool, 2), Age: []time.Duration{10 * time.Second, 10 * time.Second}}
	if edit != nil {
		edit(&c)
	}
	return c
}

func stamped(c *config) { c.Stamped = []bool{true, true, true} }

func evicting(c *config) { stamped(c); c.Evicts[0] = true }

// story is the steps the stories share.
type story struct{ cutA, meetB, lockA, lockB, evict0 event }

func steps() story {
	return story{
		cutA:   event{Kind: evPartition, C: 0, X: 0b100, D: 10 * time.Second}, // A does not reach node 2
		meetB:  event{Kind: evGrant, C: 1, K: 1, TTL: time.Second},            // B meets every node
		lockA:  event{Kind: evGrant, C: 0, K: 0, TTL: 20 * time.Second},       // A holds k0 on nodes 0 and 1
		lockB:  event{Kind: evGrant, C: 1, K: 0, TTL: 20 * time.Second},       // B tries k0
		evict0: event{Kind: evEvict, I: 0, X: 0},                              // node 0 evicts k0
	}
}

func regressions() []regression {
	s := steps()
	return []regression{
		{"T1: a replacement by an empty appendfsync always server", revertT1, schedule{three(aofAlways, nil),
			[]event{s.cutA, s.meetB, s.lockA, {Kind: evReplace, I: 0}, s.lockB, s.lockB}}},
		// B meets node 0's new process after the replacement, suspects it,
		// and its (discounted) grant stamps it; that process restarts with
		// its AOF: the stamp shows it was loaded, while the window is open.
		{"T2: a replacement, then its restart with the AOF, within the window", revertT2, schedule{three(aofAlways, nil),
			[]event{s.cutA, s.lockA, {Kind: evReplace, I: 0}, s.lockB, {Kind: evRestart, I: 0}, s.lockB, s.lockB}}},
		{"T4: an eviction of a lock key", revertT4, schedule{three(aofAlways, evicting),
			[]event{s.cutA, s.lockA, s.evict0, s.lockB}}},
		{"A5: a Client created after an empty restart, not in strict mode", revertFresh, schedule{three(aofOff, nil),
			[]event{s.cutA, s.lockA, {Kind: evRestart, I: 0}, {Kind: evClientRestart, C: 1}, s.lockB}}},
		{"D3: a plain lock lost in the unsynced second of two everysec nodes, a durable Client", mixDurable, schedule{three(aofEverysec, func(c *config) {
			stamped(c)
			c.Durable = []bool{true, true}
		}), []event{s.cutA, s.meetB, s.lockA, {Kind: evRestart, I: 0}, {Kind: evRestart, I: 1}, s.lockB, s.lockB}}},
		// A's 5 s publish reaches node 1 only; node 1 evicts its register;
		// A's window for that is short (nodes 0 and 2 carry 1 s entries),
		// so A's record of its 5 s entry on node 1 outlives the window and
		// A's lock lands there with no entry, on nodes 0 and 1. Node 0
		// restarts empty: B's witnesses 1 and 2 show no 5 s entry. Not
		// found by the search (T4's guard leaves this narrow path only).
		{"register presence: an evicted register, then a minority restart", revertRegister, schedule{three(aofAlways, func(c *config) { c.Evicts[1] = true }),
			[]event{
				{Kind: evPartition, C: 0, X: 0b101, D: 100 * time.Millisecond},
				{Kind: evGrant, C: 0, K: 0, TTL: 5 * time.Second},
				{Kind: evEvict, I: 1, X: evictRegister},
				s.meetB,
				{Kind: evAdvance, D: 200 * time.Millisecond},
				{Kind: evGrant, C: 0, K: 1, TTL: time.Second},
				s.cutA,
				{Kind: evAdvance, D: 3100 * time.Millisecond},
				{Kind: evGrant, C: 0, K: 0, TTL: 5 * time.Second},
				{Kind: evRestart, I: 0, X: 1},
				{Kind: evGrant, C: 1, K: 0, TTL: 5 * time.Second},
				{Kind: evGrant, C: 1, K: 0, TTL: 5 * time.Second},
			}}},
	}
}

// finding is a double grant the search found with the rules as first
// written; fixed since (trust.go), it is kept as a regression.
type finding struct {
	name string
	sc   schedule
}

func findings() []finding {
	s := steps()
	return []finding{
		{"first contact with a promoted replica: trusted, though it lost what its primary granted",
			schedule{three(aofAlways, func(c *config) { c.Replica[0] = true }),
				[]event{s.cutA, s.lockA, {Kind: evFailover, I: 0, D: 5 * time.Second, Y: 3600}, s.lockB}}},
		{"a restarted process that evicted keys before the Client saw it: T1-exempt",
			schedule{three(aofAlways, evicting),
				[]event{s.cutA, s.meetB, s.lockA, {Kind: evRestart, I: 0}, s.evict0, s.lockB, s.lockB}}},
		{"first contact with a process started after the Client that evicted since: its window counts from its start",
			schedule{three(aofAlways, evicting),
				[]event{{Kind: evRestart, I: 0, X: 1}, {Kind: evGrant, C: 0, K: 1, TTL: time.Second}, {Kind: evAdvance, D: 40 * time.Second}, s.cutA, s.lockA, s.evict0, s.lockB}}},
		{"an eviction the Client never saw, then a restart with the AOF kept: the count restarts at 0, T1-exempt",
			schedule{three(aofAlways, evicting),
				[]event{s.cutA, s.meetB, s.lockA, s.evict0, {Kind: evRestart, I: 0}, s.lockB, s.lockB}}},
	}
}

// exposure is a schedule outside the model (out lets it in) that breaks
// the rules: a limit SAFETY.md states.
type exposure struct {
	name string
	out  int
	sc   schedule
}

func outside() []exposure {
	s := steps()
	return []exposure{
		{"a restart that loaded an older copy of the known process's AOF: its stamp passes T1", outsideOlderCopy,
			schedule{three(aofAlways, stamped),
				[]event{s.cutA, s.meetB, {Kind: evAdvance, D: time.Second}, s.lockA, {Kind: evRestart, I: 0, X: 2, D: 500 * time.Millisecond}, s.lockB, s.lockB}}},
		{"a replica attached after the Client's last read, a fail-over, a restart: the replicated stamp passes T1", outsideAttach,
			schedule{three(aofAlways, stamped),
				[]event{s.cutA, s.meetB, {Kind: evAttach, I: 0}, {Kind: evAdvance, D: 2 * time.Second}, s.lockA,
					{Kind: evFailover, I: 0, D: time.Second, Y: 3600}, {Kind: evRestart, I: 0}, s.lockB, s.lockB}}},
	}
}
