package redlock

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/redlock-go/redlock/internal/quorum"
)

// rivals orders this Client's head of a key against other processes'
// heads without any shared state: each process's head, woken by the same
// release notification, waits before its attempt a number of round trips
// that falls with the races it has lost since it last took the lock from
// the nodes, so the process that waited longest tries first and the one
// whose run of passes just ended tries last. Runs of local passes then go
// round the processes (close to first come, first served) instead of to
// whoever wins a race. A Client that has not lost a race on the key (no
// other process wants it) does not wait.
type rivals struct {
	mu   sync.Mutex
	keys map[string]*rival
}

type rival struct {
	losses    int           // races this Client's heads lost since it last won on the nodes
	contended bool          // a race was lost since the key's queue formed: other processes want it (not a poll: it may find our own hold)
	beaten    bool          // the last race after a release notification was lost: another process may hold the key
	unit      time.Duration // how long this Client's last winning round took to its quorum
	others    bool          // a node asked since the last win said another process waits (or could not tell)
	asking    bool          // a node is being asked (askRivals)
	asked     time.Time     // when a node was last asked
	yield     time.Time     // a key shared with foreign holders: until when the head leaves it to their polls (yieldForeign)
	yieldAt   time.Time     // when the last such wait began, until this Client next takes the key
	yielded   bool          // the head's next attempt follows such a wait
	idle      int           // such waits in a row that no foreign holder used
	slow      bool          // after the last such wait, the foreign holders kept the key past foreignSlow
	owed      time.Duration // how long they had it since: this Client's next run may last as long (at most foreignSlow)
}

// rivalWait is how many units a head that lost this many races waits.
func rivalWait(losses int) int { return 2 * max(0, 3-losses) }

// giveWay is the pacer of a waiter of a type passed in runs: its head
// gives way to other processes' heads (the other types have no runs to
// share out).
type giveWay struct{}

func (giveWay) pause(w *wait) time.Duration { return w.c.raceDelay(w.key) }

func (giveWay) attempted(w *wait, res result) {
	w.c.raced(w.key, res.lock != nil, w.woken, res.out.Votes)
}

func (giveWay) next(_ context.Context, _ *wait, d time.Duration) time.Duration { return d }

// raceDelay returns how long this Client's head of key waits before its
// next attempt.
func (c *Client) raceDelay(key string) time.Duration {
	now := c.o.clock.Now()
	rs := &c.rivals
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.keys[key]
	if r == nil {
		return 0
	}
	var d time.Duration
	if r.contended {
		d = time.Duration(rivalWait(r.losses)) * r.unit
	}
	if y := r.yield.Sub(now); y > d {
		d, r.yielded = y, true
	}
	r.yield = time.Time{}
	return d
}

// yieldForeign makes this Client's next head of key, a key shared with
// foreign holders (foreign.go), wait up to foreignYield (jittered) before
// it tries again after this Client's run on it ended on the nodes: the
// other library's waiters poll and are never seen waiting, so this is
// their turn. After foreignIdle such waits in a row that no foreign
// holder used (the head then took the key), the Client stops waiting
// until one does again; after a wait that the foreign holders turned into
// a turn longer than foreignSlow (go-redsync's releasing goroutine takes
// the key straight back), the next run's end is not theirs: the turns
// alternate instead of going to whoever never lets go.
func (c *Client) yieldForeign(key string) {
	if !c.foreign.sharedKey(key) {
		return
	}
	now := c.o.clock.Now()
	rs := &c.rivals
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.rival(key)
	r.owed = 0 // the run it was for is over
	switch {
	case r.slow:
		r.slow = false // they had a long turn: this run's end is not theirs
	case r.idle < foreignIdle:
		r.yield, r.yieldAt = now.Add(jitter(foreignYield)), now
	}
}

// raced records the outcome of an attempt by this Client's head of key:
// won on the nodes or lost, and the round's votes; woken: the
// attempt followed a release notification (a race; an attempt on the
// backoff timer that finds the key held lost no race, and a head that
// polls more often must not get ahead).
func (c *Client) raced(key string, won, woken bool, votes []quorum.Vote) {
	var unit time.Duration
	now := c.o.clock.Now()
	if won {
		unit = c.quorumLatency(votes) // outside the lock
	}
	rs := &c.rivals
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.rival(key)
	switch {
	case !won:
		r.idle = 0 // someone else holds the key: waits for its turn may be used
	case r.yielded:
		r.idle++ // no one came during the wait
	}
	if won && !r.yieldAt.IsZero() {
		turn := now.Sub(r.yieldAt) // the foreign holders' turn, and the wait for it
		r.slow, r.owed, r.yieldAt = turn > foreignSlow, min(turn, foreignSlow), time.Time{}
	}
	r.yielded = false
	if !won {
		if woken {
			r.losses++
			r.beaten, r.contended = true, true
		}
		return
	}
	r.losses, r.unit = 0, unit
	r.beaten, r.others = false, false
}

// rivalSeen reports whether another process is seen waiting for key since
// this Client last took it from the nodes: its head, woken by a release,
// lost the race for it, or a node said so (askRivals), or the key is one
// a foreign value was found under (always). An attempt on the
// backoff timer that finds the key held may have found this Client's own
// hold, so it does not count; a win starts over, since who waits then
// is not known, and the next run asks.
func (c *Client) rivalSeen(key string) bool {
	if c.foreign.sharedKey(key) {
		return true // another library's waiters poll unseen (foreign.go)
	}
	rs := &c.rivals
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.keys[key]
	return r != nil && (r.beaten || r.others)
}

// askRivals asks a node, in the background, whether another process
// waits for key (handoff.Hub.Others), unless a node is being asked or was
// asked less than WithLocalHandoff's run ago; a node that cannot tell counts
// as one that says so, so that runs go on being shared out as without the
// question. A yes holds until this Client next takes the key from the
// nodes.
func (c *Client) askRivals(key string) {
	now := c.o.clock.Now()
	rs := &c.rivals
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.rival(key)
	if r.asking || !r.asked.IsZero() && now.Sub(r.asked) < c.o.localRun || c.closed.Load() {
		return
	}
	r.asking, r.asked = true, now
	c.wg.Add(1) // Close waits for it
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(c.closing, c.o.nodeTimeout)
		others, err := c.hub.Others(ctx, key)
		cancel()
		rs.mu.Lock()
		defer rs.mu.Unlock()
		if cur := rs.keys[key]; cur == r { // not forgotten meanwhile (leftRace)
			r.asking, r.others = false, others || err != nil
		}
	}()
}

// runOwed is how long this Client's run of passes on key may last after
// it left the key to foreign holders (yieldForeign): as long as it was
// away, at most foreignSlow, so that turns are shared out by time; else 0.
func (c *Client) runOwed(key string) time.Duration {
	rs := &c.rivals
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r := rs.keys[key]; r != nil {
		return r.owed
	}
	return 0
}

// rival returns key's record, making it. rs.mu is held.
func (rs *rivals) rival(key string) *rival {
	if rs.keys == nil {
		rs.keys = map[string]*rival{}
	}
	r := rs.keys[key]
	if r == nil {
		r = &rival{}
		rs.keys[key] = r
	}
	return r
}

// leftRace forgets key once this Client has no waiter for it.
func (c *Client) leftRace(key string) {
	if c.hub.Queued(key) {
		return
	}
	rs := &c.rivals
	rs.mu.Lock()
	defer rs.mu.Unlock()
	delete(rs.keys, key)
}

// quorumLatency is when a round's quorum-th yes came, within [100µs, 10ms].
func (c *Client) quorumLatency(votes []quorum.Vote) time.Duration {
	var lat []time.Duration
	for _, v := range votes {
		if v.OK {
			lat = append(lat, v.Latency)
		}
	}
	d := time.Millisecond
	if len(lat) >= c.need {
		slices.Sort(lat)
		d = lat[c.need-1]
	}
	return min(max(d, 100*time.Microsecond), 10*time.Millisecond)
}
