package quorum

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// tally counts the votes on one question put to every node (a round's
// command, or one item of a batch) and decides it: once yes reaches need,
// or once too few countable nodes are left to reach it. (int16, which
// holds every node count a round takes (maxNodes), keeps a Round on five
// nodes, which holds one, in the 768-byte size class with the 8-byte
// header that the runtime puts before objects over 512 bytes.)
type tally struct {
	need, yes, no, failed int16
	left                  int16 // countable nodes that have not answered
	decided               bool
}

// maxNodes is the most nodes a round or batch takes (tally's counters).
const maxNodes = math.MaxInt16

// add counts v (a discounted yes counts for nothing, a discounted node
// was never left) and reports whether v decided the tally.
func (t *tally) add(v Vote) bool {
	switch {
	case v.Err != nil:
		t.failed++
	case v.OK:
		if !v.Discounted {
			t.yes++
		}
	default:
		t.no++
	}
	if !v.Discounted {
		t.left--
	}
	return t.check()
}

// check decides t if its outcome is known, reporting whether it did now.
func (t *tally) check() bool {
	if !t.decided && (t.yes >= t.need || t.yes+t.left < t.need) {
		t.decided = true
		return true
	}
	return false
}

func (t *tally) outcome(votes []Vote, err error) Outcome {
	return Outcome{Votes: votes, Yes: int(t.yes), No: int(t.no), Failed: int(t.failed), Reached: t.yes >= t.need, Err: err}
}

// core is what single rounds and batches share: the per-node gate, one
// tally per question, and the decision, taken once every tally is
// decided. A node's answer is counted on every question until then, and
// on none after it.
type core struct {
	cfg     Config
	start   time.Time
	mu      sync.Mutex
	off     []bool  // per node: its yes does not count (Config.Counts)
	tallies []tally // per question
	open    int32   // tallies not decided
	decided bool
	// done is closed at the decision. A batch makes it before init; a
	// Round only when a Wait needs it (most waits need none: see Wait).
	done chan struct{}
}

// init sets c up for cfg over tallies, with c.off of length cfg.N; it
// asks Counts once per node and decides at once if the outcome is already
// known (too many nodes discounted).
func (c *core) init(cfg Config, tallies []tally) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.N > maxNodes || cfg.Need > maxNodes {
		panic(fmt.Sprintf("quorum: %d nodes, at most %d", cfg.N, maxNodes))
	}
	c.cfg, c.tallies = cfg, tallies
	var left int16
	for i := range c.off {
		if cfg.Counts == nil || cfg.Counts(i) {
			left++
		} else {
			c.off[i] = true
		}
	}
	c.open = int32(len(tallies))
	for j := range tallies {
		tallies[j] = tally{need: int16(cfg.Need), left: left}
		if tallies[j].check() {
			c.open--
		}
	}
	c.start = cfg.Now()
	c.settle()
}

// count counts a node's vote v on question j. c.mu must be held and the
// round not decided.
func (c *core) count(j int, v Vote) {
	if c.tallies[j].add(v) {
		c.open--
	}
}

// settle decides the round once every question is. c.mu must be held (or
// c not yet shared).
func (c *core) settle() {
	if !c.decided && c.open == 0 {
		c.decided = true
		if c.done != nil {
			close(c.done)
		}
	}
}
