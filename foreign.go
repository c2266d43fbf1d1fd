package redlock

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/quorum"
)

// Owner values that this library did not write (go-redsync's, during a
// rolling migration) are foreign: their holders publish nothing when they
// release, and their TTLs are in no register. A Client finds them by
// reading a refused key (node.Holder): a waiter then polls instead of
// waiting out its backoff (pollForeign), and the restart quarantine keeps
// restarted nodes out for the whole setting (quarantine.floorNow).
const (
	// foreignPoll bounds a waiter's wait between attempts while the key is
	// held by a foreign value, with jitter in [foreignPoll/2, foreignPoll]:
	// about how often a go-redsync waiter tries (50-250 ms at random).
	foreignPoll = 50 * time.Millisecond
	// foreignYield bounds how long this Client's head waits, jittered in
	// [foreignYield/2, foreignYield], before it takes back a key shared
	// with foreign holders after its own run on it (yieldForeign): about
	// one retry interval of a go-redsync waiter (50-250 ms at random), so
	// that one of several waiting there usually tries within it.
	foreignYield = 100 * time.Millisecond
	// foreignIdle is how many such waits in a row no foreign holder may
	// use before the Client stops waiting on the key.
	foreignIdle = 3
	// foreignSlow is how long a foreign turn (from such a wait to this
	// Client's next lock) may last before the next wait is skipped.
	foreignSlow = time.Second
	// foreignRecheck is how long a waiter trusts what a read found before
	// it reads the key again.
	foreignRecheck = time.Second
	// sampleFirst and sampleMax bound how often a Client reads a refused
	// key to look for foreign values, until it has found one: the interval
	// doubles with each read that found none.
	sampleFirst = time.Second
	sampleMax   = 16 * time.Second
	// sampleFree is how soon a Client may read again after a read that
	// found the refused key free (its holder left meanwhile).
	sampleFree = 100 * time.Millisecond
)

// foreignState is what a Client learned about foreign owner values. It is
// safe for concurrent use.
type foreignState struct {
	seen  atomic.Bool  // a foreign value was found: reads only for waiters from now on
	next  atomic.Int64 // the earliest next sample (UnixNano on the Client's clock)
	every atomic.Int64 // the interval after the next sample; 0: sampleFirst

	mu   sync.Mutex
	keys map[string]time.Time // keys a foreign value was found under, and when last (at most foreignKeysMax)
}

// foreignKeysMax bounds how many keys a Client remembers foreign values
// under; past it, the key found longest ago is forgotten.
const foreignKeysMax = 1024

// foundOn records that a foreign value was found under key at now.
func (f *foreignState) foundOn(key string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys == nil {
		f.keys = map[string]time.Time{}
	}
	if _, ok := f.keys[key]; !ok && len(f.keys) >= foreignKeysMax {
		oldest, at := "", now
		for k, t := range f.keys {
			if t.Before(at) {
				oldest, at = k, t
			}
		}
		delete(f.keys, oldest)
	}
	f.keys[key] = now
}

// sharedKey reports whether a foreign value was ever found under key
// (within the last foreignKeysMax keys): its holders' waiters are not
// seen (they poll; a foreign release publishes nothing), so the key is
// treated as one another process waits for.
func (f *foreignState) sharedKey(key string) bool {
	if !f.seen.Load() {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.keys[key]
	return ok
}

// ownFormat reports whether v is an owner value this library writes
// (newOwner): an instance id ([name/]UUID), a colon, 22 base64url bytes.
func ownFormat(v string) bool {
	client, attempt := splitOwner(v)
	if len(attempt) != 22 || client == "" {
		return false
	}
	if i := strings.LastIndexByte(client, '/'); i >= 0 {
		client = client[i+1:]
	}
	if len(client) != 36 {
		return false
	}
	for i, r := range client {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if r != '-' {
				return false
			}
		case !('0' <= r && r <= '9' || 'a' <= r && r <= 'f'):
			return false
		}
	}
	return true
}

// holding is one read of a key on every node (holders).
type holding struct {
	foreign bool          // some node holds a foreign value
	own     bool          // some node holds this library's value
	free    int           // nodes that hold nothing under the key
	left    time.Duration // foreign only: until enough foreign holds expire for a quorum; 0 unknown
	at      time.Time     // when the read was made
}

// holders reads key on every node (GET and PTTL, each within the node
// timeout) and reports what they hold; a node that does not answer counts
// as neither free nor holding. Finding a foreign value turns on what a
// mixed deployment needs (sawForeign).
func (c *Client) holders(ctx context.Context, key string) holding {
	hs := make([]node.Holding, len(c.nodes))
	ok := make([]bool, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Add(1)
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, c.o.nodeTimeout)
			defer cancel()
			var err error
			hs[i], err = n.Holder(ctx, key)
			ok[i] = err == nil
		}()
	}
	wg.Wait()
	h := holding{at: c.o.clock.Now()}
	var left []time.Duration // the foreign holds' PTTLs, 0 if unknown
	for i, v := range hs {
		switch {
		case !ok[i]:
		case v.Other:
			h.own = true // a typed lock is this library's; other data is no lock to wait for
		case v.Value == "":
			h.free++
		case ownFormat(v.Value):
			h.own = true
		default:
			h.foreign = true
			left = append(left, v.Left)
		}
	}
	if h.foreign {
		c.foreign.foundOn(key, h.at)
		c.sawForeign(ctx, key)
		if k := c.need - h.free; k > 0 && k <= len(left) {
			slices.Sort(left)
			if left[0] > 0 {
				h.left = left[k-1] // the k-th foreign hold to expire frees a quorum
			}
		}
	}
	return h
}

// sawForeign records that a foreign value was found under key: once per
// Client, the restart quarantine keeps the setting as the floor of every
// window (their locks are in no register), and a warning names the
// setting the deployment needs.
func (c *Client) sawForeign(ctx context.Context, key string) {
	if c.foreign.seen.Swap(true) {
		return
	}
	msg := "redlock: a lock on the nodes was written by another library (go-redsync?); its locks are in no TTL register: " +
		"restart windows now fall back to the quarantine setting, which must be at least that library's longest expiry; " +
		"set WithRestartQuarantine(d, QuarantineSettingFloor) on every instance while both run"
	attrs := []slog.Attr{slog.String("client", c.id), slog.String("key", key)}
	switch {
	case c.q == nil:
		msg = "redlock: a lock on the nodes was written by another library (go-redsync?); its locks are in no TTL register " +
			"and the restart quarantine is off: a node that restarts empty may grant its key twice; " +
			"set WithRestartQuarantine(d, QuarantineSettingFloor), d at least that library's longest expiry"
	case c.q.floorNow():
		attrs = append(attrs, slog.Duration("setting", c.o.qWindow))
	default:
		return // QuarantineSettingFloor is set: nothing to say
	}
	lg := c.o.logger
	if lg == nil {
		lg = slog.Default()
	}
	lg.LogAttrs(ctx, slog.LevelWarn, msg, attrs...)
}

// sample reads key in the background after a refused attempt, at most
// once per sampleFirst, then, while the reads find a holder of this
// library's, less often up to sampleMax, until a foreign value has been
// found: so that a Client that only ever TryLocks or waits with a short
// backoff also learns of a mixed deployment. A read that finds the key
// free (its holder, maybe a short foreign hold, left meanwhile) lets the
// next refusal read again after sampleFree.
func (c *Client) sample(key string) {
	f := &c.foreign
	if f.seen.Load() || c.closed.Load() {
		return
	}
	now, next := c.o.clock.Now().UnixNano(), f.next.Load()
	every := max(time.Duration(f.every.Load()), sampleFirst)
	if now < next || !f.next.CompareAndSwap(next, now+int64(every)) {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		h := c.holders(context.Background(), key)
		switch {
		case h.own:
			f.every.Store(int64(min(2*every, sampleMax))) // a holder of ours refused it: less often
		case !h.foreign:
			f.every.Store(int64(sampleFirst))
			f.next.Store(h.at.Add(sampleFree).UnixNano()) // gone already, maybe a short foreign hold: look again soon
		}
	}()
}

// pollForeign is the pacer of a waiter whose key a foreign value may
// hold: its release publishes nothing, so the waiter polls it.
type pollForeign struct {
	held holding // the waited-for key as last read
}

func (*pollForeign) pause(*wait) time.Duration { return 0 }

func (*pollForeign) attempted(*wait, result) {}

// next returns the wait before the waiter's next attempt, d by its
// backoff, after a refused attempt. While the key is held by a foreign
// value the wait is at most a jittered foreignPoll, or the time until
// enough of its holds expire, if shorter. The key is read only when d is
// longer than foreignPoll and the last read is older than foreignRecheck
// or found no holder of this library's: in a deployment of this library
// alone, a waiter reads at most once per foreignRecheck, however often
// the holder changes.
func (p *pollForeign) next(ctx context.Context, w *wait, d time.Duration) time.Duration {
	c := w.c
	if w.woken && !p.held.own {
		p.held = holding{} // a holder of ours released: the key may be anyone's now
	}
	if d <= foreignPoll {
		return d // no longer than a poll: nothing to gain
	}
	now := c.o.clock.Now()
	if p.held.at.IsZero() || now.Sub(p.held.at) >= foreignRecheck || !p.held.foreign && !p.held.own {
		p.held = c.holders(ctx, w.r.keys[0]) // the key on the nodes
	}
	if !p.held.foreign {
		if !p.held.own && p.held.free >= c.need {
			return min(d, jitter(foreignPoll)) // freed since the attempt, by someone we did not hear
		}
		return d
	}
	poll := min(d, jitter(foreignPoll))
	if p.held.left > 0 {
		// Once past, the estimate is wrong (extended, another holder): poll.
		if until := p.held.left - now.Sub(p.held.at); until > 0 && until < poll {
			poll = until + time.Millisecond
		}
	}
	return poll
}

// jitter returns a duration in [d/2, d].
func jitter(d time.Duration) time.Duration {
	half := d / 2
	return half + rand.N(d-half+1)
}

// refusedByHolder reports whether some node of out said a plain no: the
// key was held there.
func refusedByHolder(out quorum.Outcome) bool {
	for _, v := range out.Votes {
		if v.Err == nil && !v.OK {
			return true
		}
	}
	return false
}
