package redlock

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/observe"
)

// published is what this Client published in one node's TTL register,
// since the node's current process started: per TTL bucket, the time on
// this Client's clock before which the entry surely has not expired.
type published struct {
	mu      sync.Mutex
	covered map[time.Duration]time.Time
}

// reset forgets what was published: the node is a new process.
func (p *published) reset() {
	p.mu.Lock()
	p.covered = nil
	p.mu.Unlock()
}

// due reports whether bucket b needs publishing before a command with ttl
// sent at now: the entry must outlive every lock the command may grant or
// lengthen, whose validity ends before now + ttl.
func (p *published) due(b, ttl time.Duration, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.covered[b].Before(now.Add(ttl))
}

// note records an entry for b that lives at least until until; expired
// records are dropped.
func (p *published) note(b time.Duration, until, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.covered == nil {
		p.covered = map[time.Duration]time.Time{}
	}
	for k, u := range p.covered {
		if u.Before(now) {
			delete(p.covered, k)
		}
	}
	if until.After(p.covered[b]) {
		p.covered[b] = until
	}
}

// publishSlack is how much longer than its TTL a published entry lives
// (at most; TTLs under it get their own length): one publish per node and
// TTL covers the locks of about that long, instead of one per lock.
const publishSlack = 10 * time.Second

// holdFor returns how long an entry for bucket b must live on the node's
// clock so that, under the drift factor, it lives on this Client's clock
// at least b + slack + 1 s, the slack being min(b, publishSlack).
func holdFor(b time.Duration, factor float64) time.Duration {
	want := b + min(b, publishSlack) + time.Second + clockResolution
	if factor <= 0 || factor >= 0.5 {
		factor = 0.5
	}
	return time.Duration(float64(want)/(1-factor)) + time.Millisecond
}

// publish makes node i's TTL register cover a command with ttl sent now
// (see published.due): if what this Client published there since the
// node's start does not, it raises the entry of ttl's bucket first (one
// script, node.RaiseTTL). So every node that grants or lengthens a lock
// carries, in its register, an entry that outlives the lock: what the
// window of another node's restart is read from (see resolveLater). Any
// failure (an ACL without the key, OOM, MISCONF, LOADING, a timeout) keeps
// the command from being sent there: the returned not-sent error says why,
// the first error reply of a run of them is logged (warnNode), and the
// next call tries again.
func (c *Client) publish(ctx context.Context, i int, ttl time.Duration) error {
	if c.q == nil {
		return nil
	}
	b, p := node.TTLBucket(ttl), &c.ids.pub[i]
	if !p.due(b, ttl, c.o.clock.Now()) {
		return nil
	}
	hold := holdFor(b, c.o.driftFactor)
	sent := c.o.clock.Now()
	if _, err := c.nodes[i].Do(ctx, node.RaiseTTL(b, hold, c.o.durable)); err != nil {
		var re redis.Error
		if errors.As(err, &re) { // refused (NOPERM, OOM, MISCONF, LOADING, BUSY): a dead node is logged elsewhere
			c.warnNode(ctx, i, &c.ids.regWarned[i], "redlock: the node's TTL register ("+node.TTLRegisterKey+") cannot be written: its votes do not count until it can", err)
		}
		return gated(c.nodes[i].Addr(), "TTL register ("+node.TTLRegisterKey+") not written, so the vote would be in no register",
			"its TTL register ("+node.TTLRegisterKey+") not written", err)
	}
	c.ids.regWarned[i].Store(false)
	p.note(b, sent.Add(hold-DriftBudget(hold, c.o.driftFactor)), c.o.clock.Now())
	return nil
}

// witnessRead is what one node answered when the registers were read for
// another node's restart.
type witnessRead struct {
	read  bool   // identity and register read
	ok    bool   // read, and the node can vouch for its register (quarantine.witness)
	runID string // its process
	reg   node.Register
	at    time.Time // this Client's clock when the answer came (after the node read its clock)
}

// proveWindow is the rule (SAFETY.md, "Restart windows"): a node that
// restarted at base (the latest start INFO allows) held only locks granted
// or lengthened before base, each on a quorum of at least n/2+1 nodes that
// all published the lock's TTL, with an entry outliving it, before they
// granted it. Any n - n/2 nodes include one of every such quorum; if that
// many distinct witnesses (nodes that kept their register since, see
// quarantine.witness) answered, every lock the node may have lost and
// that may still be held has its TTL d among their live entries, and ends
// by base + d and by that entry's expiry. The window ends at the latest of
// these caps over all entries read (base if there are none, drift budgets
// added); proven is false when too few witnesses answered. For a node that
// kept its votes (it loaded the append-only file of the process that took
// them, see quarantine.learn), durable entries are left out: their locks'
// votes were confirmed on its disk before they counted, so it lost none.
func proveWindow(base time.Time, self string, n int, reads []witnessRead, factor float64, kept bool) (until time.Time, proven bool) {
	seen := map[string]bool{self: true} // one vote per server: an alias of the node or of a witness counts once
	until = base
	for _, r := range reads {
		if !r.ok || seen[r.runID] {
			continue
		}
		seen[r.runID] = true
		caps := func(d time.Duration, left time.Duration, expires bool) {
			u := base.Add(d + DriftBudget(d, factor))
			if e := r.at.Add(left + DriftBudget(left, factor)); expires && e.Before(u) {
				u = e
			}
			if u.After(until) {
				until = u
			}
		}
		for _, e := range r.reg.Entries {
			if !(kept && e.Durable) {
				caps(e.TTL, e.Left, true)
			}
		}
		if r.reg.Legacy > 0 {
			caps(r.reg.Legacy, 0, false)
		}
	}
	return until, len(seen)-1 >= n-n/2
}

// allDurable reports whether every register read (witness or not) and the
// restarted node's own (own) carry only durable entries: no lock granted
// without durable votes may still be held there. It stands in for the
// witnesses of a restarted node that kept its votes when too few answered
// (a majority restarted together), under WithDurableVotes' assumption that
// every Client of the nodes uses durable votes (SAFETY.md).
func allDurable(own node.Register, reads []witnessRead) bool {
	plain := func(r node.Register) bool {
		for _, e := range r.Entries {
			if !e.Durable {
				return true
			}
		}
		return r.Legacy > 0
	}
	if plain(own) {
		return false
	}
	for _, r := range reads {
		if r.read && plain(r.reg) {
			return false
		}
	}
	return true
}

// resolveLater resolves suspect node i's window on a goroutine of its own
// (Close waits for it): it reads every other node's identity and TTL
// register (readWitnesses), and applies the rule (proveWindow); the node
// does not count meanwhile. Where the rule shows no window, the fallback
// applies (quarantine.resolve), and the registers are read again every
// retryRead while the fallback lasts: a window shown later ends the
// quarantine earlier. Read in the call that found the node suspect, a
// partitioned node's timeout would hold that call past its deadline.
func (c *Client) resolveLater(i int, epoch uint64, runID string, kept bool, own node.Register) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			reads, longest := c.readWitnesses(i)
			c.q.mu.Lock()
			base := c.q.base[i]
			c.q.mu.Unlock()
			until, proven := proveWindow(base, runID, len(c.nodes), reads, c.o.driftFactor, kept)
			bound := observe.BoundRegister
			if !proven && kept && c.o.durable && allDurable(own, reads) {
				until, proven, bound = base, true, observe.BoundDurable
			}
			u, bound, moved := c.q.resolve(i, epoch, proven, until, longest, bound)
			if moved {
				c.logWindow(i, runID, u, bound)
			}
			if proven || !u.After(c.o.clock.Now()) || !c.q.current(i, epoch) {
				return
			}
			if c.o.clock.Sleep(c.closing, retryRead) != nil {
				return
			}
		}
	}()
}

// retryRead is how often the registers are read again while a node's
// window is the fallback.
const retryRead = 250 * time.Millisecond

// logWindow logs node i's window: which bound set it and until when.
func (c *Client) logWindow(i int, runID string, until time.Time, bound string) {
	if c.o.logger == nil {
		return
	}
	now := c.o.clock.Now()
	c.o.logger.LogAttrs(context.Background(), slog.LevelWarn, "redlock: node quarantined", slog.String("client", c.id),
		slog.String("node", c.nodes[i].Addr()), slog.String("run_id", runID), slog.String("bound", bound),
		slog.Time("until", until), slog.Duration("for", max(0, until.Sub(now))))
}

// readWitnesses reads the identity and TTL register of every node but i,
// in parallel within the node timeout (at least retryRead), and returns what each answered and
// the longest TTL any register carried (the fallback's share).
func (c *Client) readWitnesses(i int) ([]witnessRead, time.Duration) {
	// In the background, so not the caller's node deadline: a loaded node
	// that answers late would cost the proof, and the node the fallback.
	ctx, cancel := context.WithTimeout(c.closing, max(c.o.nodeTimeout, retryRead))
	defer cancel()
	reads := make([]witnessRead, len(c.nodes))
	var mu sync.Mutex
	var longest time.Duration
	var wg sync.WaitGroup
	for j := range c.nodes {
		if j == i {
			continue
		}
		wg.Add(1)
		go func(j int) {
			defer wg.Done()
			id, reg, err := c.nodes[j].IdentifyRegister(ctx)
			if err != nil {
				return
			}
			at := c.o.clock.Now()
			mu.Lock()
			longest = max(longest, reg.Longest())
			mu.Unlock()
			reads[j] = witnessRead{read: true, ok: c.q.witness(j, id), runID: id.RunID, reg: reg, at: at}
		}(j)
	}
	wg.Wait()
	return reads, longest
}
