package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/observe"
)

// Availability under majority restarts with durable votes: the workload
// of TestRestartAvailability (5 nodes, 6 clients, TTL 400 ms, holds of 20
// ms; three nodes SIGKILLed every 3 s and started again 500 ms later) on
// nodes that keep their append-only files (appendfsync everysec, hz 100).
// With durable votes the restarted nodes count again at once; without
// them (the quarantine alone: everysec may lose the last writes) they stay
// out for the window. No overlap, ever; and durable votes keep at least
// twice the holds of the quarantine alone under the same restarts (both
// measured in this run, so a loaded machine slows both alike). The goal
// of 50 % of the run without faults depends on how fast restarted nodes
// come back, so it is reported, not checked. Figures as in
// TestRestartAvailability (RESTART_AVAIL_DURATION, DURABLE_AVAIL_OUT; the
// ratio is checked on runs of 10 s or more: make durable runs 15 s):
//
//	cd integration && RESTART_AVAIL_DURATION=15s go test -run TestDurableAvailability -v -count=1 ./chaos/
func TestDurableAvailability(t *testing.T) {
	cfg := harness.DurableConfig(t)
	dur := availDuration(t)
	table := "| faults | contender | holds | vs no faults | overlaps |\n|---|---|---|---|---|\n"
	var base int
	faulted := map[string]int{} // holds under majority restarts, per contender
	for _, r := range []struct{ faults, contender string }{
		{"", "redlock durable"}, {"majority", "redlock durable"}, {"", "redlock"}, {"majority", "redlock"},
	} {
		holds, overlaps := availabilityRun(t, r.contender, r.faults, dur, cfg)
		if r.faults == "" {
			base = holds
		}
		ratio := float64(holds) / float64(max(base, 1))
		name := map[string]string{"": "no faults", "majority": "majority restarts (AOF kept)"}[r.faults]
		t.Logf("%-28s %-15s holds %4d (%.2f of no faults), overlaps %d", name, r.contender, holds, ratio, overlaps)
		table += fmt.Sprintf("| %s | %s | %d | %.2f | %d |\n", name, r.contender, holds, ratio, overlaps)
		switch {
		case overlaps != 0:
			t.Errorf("%s, %s: %d overlapping holds", name, r.contender, overlaps)
		case r.faults != "":
			faulted[r.contender] = holds
			if r.contender == "redlock durable" && ratio < 0.5 {
				t.Logf("goal not reached: majority restarts with durable votes kept %.2f of the holds without faults (goal 0.5)", ratio)
			}
		}
	}
	if d, q := faulted["redlock durable"], faulted["redlock"]; d < 2*q && dur >= 10*time.Second {
		t.Errorf("majority restarts: %d holds with durable votes, %d with the quarantine alone; want at least twice as many", d, q)
	}
	if out := os.Getenv("DURABLE_AVAIL_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// durableNodes are nodes with appendonly yes and appendfsync everysec (hz
// 100): a crash may lose the last writes, so only durable votes (or the
// quarantine) keep the locks. On Redis a durable vote may wait up to a
// second for its fsync: majorityRestart's node timeout allows it.
func durableNodes(t *testing.T, n int) []*harness.Node {
	return harness.Start(t, n, harness.DurableEverysec(t))
}

// majorityRestart: A holds k (TTL 20 s) on 5 nodes; nodes 0, 1, 2 are
// killed (SIGKILL) and started again, with their append-only files or
// (wipe) empty; B, which knew the nodes before, then tries k while A's
// lock is valid. It returns both holds as the checker's Records (B's only
// if it got k), the Clients, A's lock and B's error.
func majorityRestart(t *testing.T, nodes []*harness.Node, wipe bool, opts ...redlock.Option) ([]Record, *redlock.Client, *redlock.Client, *redlock.Lock, error) {
	ctx := context.Background()
	opts = append([]redlock.Option{redlock.WithNodeTimeout(3 * time.Second), redlock.WithMaxAttempts(1)}, opts...)
	a, err := harness.NewClient(t, harness.URLs(nodes), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err := harness.NewClient(t, harness.URLs(nodes), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if l, err := b.TryLock(ctx, "warm", 30*time.Second, redlock.WithMaxAttempts(20)); err != nil { // B learns the nodes' processes
		t.Fatal(err)
	} else {
		_ = l.Release(ctx)
	}
	const ttl = 20 * time.Second
	call := Mono()
	la, err := a.TryLock(ctx, "k", ttl)
	acq := Mono()
	if err != nil {
		t.Fatalf("A: %v", err)
	}
	recs := []Record{{Client: 0, Key: "k", Call: call, Acq: acq, RelCall: 1 << 62, Valid: acq + int64(time.Until(la.Deadline()))}}
	for _, n := range nodes[:3] {
		n.Kill()
		if wipe {
			if err := n.Wipe(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, n := range nodes[:3] {
		if err := n.Up(); err != nil { // returns once the node answers (its AOF loaded)
			t.Fatal(err)
		}
	}
	call = Mono()
	lb, err := b.TryLock(ctx, "k", ttl)
	acq = Mono()
	if err == nil {
		recs = append(recs, Record{Client: 1, Key: "k", Call: call, Acq: acq, RelCall: 1 << 62, Valid: acq + int64(time.Until(lb.Deadline()))})
	}
	return recs, a, b, la, err
}

// Durable votes: a majority of the nodes crash (SIGKILL) mid-hold and
// restart with their append-only files. The holder's lock survives (no
// second holder, and the holder extends it), and the restarted nodes count
// again at once: no quarantine window (bound "durable votes"), so B gets
// the key as soon as A releases it, long before the quarantine's setting
// (the default 45 s window) would have let the nodes back.
func TestDurableVotesSurviveMajorityRestart(t *testing.T) {
	nodes := durableNodes(t, 5)
	recs, a, b, held, err := majorityRestart(t, nodes, false, redlock.WithDurableVotes())
	if n, msgs := Overlaps(recs); n != 0 || err == nil {
		t.Fatalf("B got the key held by A after the restart (err %v): %d overlaps %v", err, n, msgs)
	}
	if !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("B: %v, want ErrNotObtained", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// A's next calls meet the restarted processes: each is identified, its
	// register read, and found to have kept its votes.
	la, err := a.Lock(ctx, "k2", time.Minute, redlock.WithMaxAttempts(1000)) // any quorum includes a restarted node
	if err != nil {
		for _, n := range nodes {
			c := n.Client()
			m, _ := c.HGetAll(context.Background(), "redlock:ttl").Result()
			info, _ := c.Info(context.Background(), "server").Result()
			t.Logf("node %s register %v run_id line %q", n.Addr, m, info[strings.Index(info, "run_id"):strings.Index(info, "run_id")+48])
			c.Close()
		}
		t.Fatalf("A after the restart: %v; A's quarantine %+v", err, a.Stats().Quarantine)
	}
	_ = la.Release(ctx)
	// Each restarted node's window is shown at once: by the durable votes,
	// or by the registers of enough witnesses (which left out the durable
	// entries); never the setting's fallback.
	shown := func(q observe.QuarantineStats) bool {
		for _, w := range q.Nodes[:3] {
			if w.Pending || w.Bound != observe.BoundDurable && w.Bound != observe.BoundRegister {
				return false
			}
		}
		return true
	}
	for !shown(b.Stats().Quarantine) {
		if _, err := b.TryLock(ctx, "probe", 30*time.Second); ctx.Err() != nil {
			t.Fatalf("B's quarantine did not exempt the restarted nodes: %+v (last: %v)", b.Stats().Quarantine, err)
		}
	}
	if q := b.Stats().Quarantine; q.Now != 0 || q.ByDurable == 0 {
		t.Fatalf("nodes still quarantined, or none exempt by durable votes: %+v", q)
	}
	// The original lock is still held on the restarted nodes: extending it
	// needs 3 of 5, so at least one restarted node kept it.
	if err := held.Extend(ctx, 20*time.Second); err != nil {
		t.Fatalf("A's lock after the restart: %v", err)
	}
	t.Logf("B's quarantine: %+v", b.Stats().Quarantine)
}

// The restart lost the nodes' append-only files (wiped): durable votes or
// not, they are empty, and their registers do not name the processes
// before them, so the quarantine keeps them out (not kept): B does not get
// the key A holds on only 2 of 5 nodes now.
func TestDurableVotesLostAOFQuarantined(t *testing.T) {
	nodes := durableNodes(t, 5)
	recs, _, b, _, err := majorityRestart(t, nodes, true, redlock.WithDurableVotes())
	t.Logf("B's first try: %v", err)
	ctx := context.Background()
	for i := 0; i < 20; i++ { // more tries, each one a chance for a second holder
		call := Mono()
		lb, err := b.TryLock(ctx, "k", 30*time.Second)
		if acq := Mono(); err == nil {
			recs = append(recs, Record{Client: 1, Key: "k", Call: call, Acq: acq, RelCall: 1 << 62, Valid: acq + int64(time.Until(lb.Deadline()))})
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n, msgs := Overlaps(recs); n != 0 {
		t.Fatalf("B got the key held by A after the AOF was lost: %d overlaps %v", n, msgs)
	}
	q := b.Stats().Quarantine
	if q.ByDurable != 0 || q.Now < 3 {
		t.Fatalf("quarantine after a restart that lost its AOF: %+v, want the 3 nodes in, none exempt", q)
	}
	for _, w := range q.Nodes[:3] {
		t.Logf("node %s: bound %q until %v (pending %v)", w.Addr, w.Bound, w.Until, w.Pending)
	}
}

// The sanity twin: no durable votes, no persistence, quarantine off. The
// same majority restart comes back empty and B gets the key A holds: the
// checker must report the overlap (it can fail).
func TestSanityDurableTwinOverlaps(t *testing.T) {
	if tr := harness.Transport(); tr != "goredis" {
		// As core's TestRestartQuarantineOffDoubleGrant: the overlap needs
		// the first command after the restarts to reach the new processes;
		// via rueidis and valkey-go it meets the old connection's EOF.
		t.Skipf("via %s the first command after a restart meets the old connection's EOF", tr)
	}
	nodes := harness.Start(t, 5, harness.Config{})
	recs, _, _, _, err := majorityRestart(t, nodes, false, redlock.WithRestartQuarantine(redlock.QuarantineOff))
	n, msgs := Overlaps(recs)
	t.Logf("B: %v; overlaps=%d %v", err, n, msgs)
	if n == 0 {
		t.Fatal("sanity case: an empty majority restart without quarantine showed no overlap")
	}
}

// A fail-over to a replica that lags: nodes 0 and 1 are primaries, each
// with a replica that synced the durable Clients' AOF stamps and then
// stopped replicating (a lag that never caught up) before A took k; the
// primaries die and their addresses now reach the replicas, promoted, as a
// Sentinel fail-over or a moved DNS name would. The replicas carry the old
// primaries' stamps (a full sync copies every key) but not A's lock, which
// WAITAOF confirmed on the primaries' disks only. A promoted process never
// counts as having kept its durable votes, so B, which knew the old
// primaries, must stay out while A's lock is valid. Before that rule the
// two replicas were exempt at once, as restarts that loaded their AOF, and
// B held k with them.
func TestDurableFailoverToLaggingReplica(t *testing.T) {
	ctx := context.Background()
	cfg := harness.DurableEverysec(t)
	nodes := harness.Start(t, 3, cfg)
	replicas := harness.Start(t, 2, cfg)
	var upstream [2]atomic.Pointer[string]
	urls := []string{"", "", nodes[2].URL()}
	for i := range replicas {
		addr := nodes[i].Addr
		upstream[i].Store(&addr)
		p, err := harness.NewProxy(func() string { return *upstream[i].Load() })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		urls[i] = p.URL()
	}
	opts := []redlock.Option{redlock.WithNodeTimeout(3 * time.Second), redlock.WithMaxAttempts(1), redlock.WithDurableVotes()}
	a, err := harness.NewClient(t, urls, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	b, err := harness.NewClient(t, urls, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	for _, c := range []*redlock.Client{a, b} { // stamps on every node; every process known
		l, err := c.TryLock(ctx, "fo:warm", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Release(ctx)
	}
	for i, r := range replicas {
		host, port, _ := strings.Cut(nodes[i].Addr, ":")
		rc := r.Client()
		if err := rc.Do(ctx, "replicaof", host, port).Err(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			n, _ := rc.Exists(ctx, node.AOFStampKey).Result()
			if n == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %d has no AOF stamp after its sync", i)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := rc.Do(ctx, "replicaof", "no", "one").Err(); err != nil { // the lag: it sees nothing after this
			t.Fatal(err)
		}
		rc.Close()
	}
	held, err := a.TryLock(ctx, "fo:k", 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range replicas {
		nodes[i].Kill()
		addr := r.Addr
		upstream[i].Store(&addr)
	}
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		l, err := b.TryLock(ctx, "fo:k", 2*time.Second)
		if err == nil {
			_ = l.Release(ctx)
			t.Fatalf("B holds fo:k through the promoted replicas while A's lock is valid (B's quarantine %+v)", b.Stats().Quarantine)
		}
	}
	if time.Until(held.Deadline()) < time.Second {
		t.Fatal("the check ran past A's validity")
	}
	for i, w := range b.Stats().Quarantine.Nodes[:2] {
		if w.Bound == observe.BoundDurable {
			t.Errorf("node %d, a promoted replica, exempt by durable votes: %+v", i, w)
		}
	}
}
