package redlock

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/trust"
	"github.com/redlock-go/redlock/observe"
)

// readWitnesses and the rule they feed: every node that grants or
// lengthens a lock carries, in its TTL register, an entry that outlives
// the lock (the guard's grant script makes sure of it, see node.Bind):
// what the window of another node's loss is read from (trust.Prove).

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
			budget := func(d time.Duration) time.Duration { return driftBudget(d, c.o.driftFactor) }
			base := c.q.base(i)
			until, proven := trust.Prove(base, runID, len(c.nodes), reads, budget, kept)
			bound := observe.BoundRegister
			if !proven && kept && c.o.durable && trust.AllDurable(entries(own), own.Legacy, reads) {
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
func (c *Client) readWitnesses(i int) ([]trust.Read, time.Duration) {
	// In the background, so not the caller's node deadline: a loaded node
	// that answers late would cost the proof, and the node the fallback.
	ctx, cancel := context.WithTimeout(c.closing, max(c.o.nodeTimeout, retryRead))
	defer cancel()
	reads := make([]trust.Read, len(c.nodes))
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
			reads[j] = trust.Read{Read: true, Witness: c.q.witness(j, id), RunID: id.RunID, Entries: entries(reg), Legacy: reg.Legacy, At: at}
		}(j)
	}
	wg.Wait()
	return reads, longest
}

// entries converts a register's entries for trust.
func entries(r node.Register) []trust.Entry {
	es := make([]trust.Entry, len(r.Entries))
	for i, e := range r.Entries {
		es[i] = trust.Entry{TTL: e.TTL, Left: e.Left, Durable: e.Durable}
	}
	return es
}
