package redlock

import (
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
	contended bool          // a race was lost since the key's queue formed: other processes want it
	unit      time.Duration // how long this Client's last winning round took to its quorum
}

// rivalWait is how many units a head that lost this many races waits.
func rivalWait(losses int) int { return 2 * max(0, 3-losses) }

// raceDelay returns how long this Client's head of key waits before its
// next attempt: only types passed in runs give way (the others have no
// runs to share out).
func (c *Client) raceDelay(key string, t lockType) time.Duration {
	if !t.runs() {
		return 0
	}
	rs := &c.rivals
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.keys[key]
	if r == nil || !r.contended {
		return 0
	}
	return time.Duration(rivalWait(r.losses)) * r.unit
}

// raced records the outcome of an attempt by this Client's head of key
// (of type t): won on the nodes or lost, and the round's votes; woken: the
// attempt followed a release notification (a race; an attempt on the
// backoff timer that finds the key held lost no race, and a head that
// polls more often must not get ahead).
func (c *Client) raced(key string, t lockType, won, woken bool, votes []quorum.Vote) {
	if !t.runs() {
		return
	}
	var unit time.Duration
	if won {
		unit = c.quorumLatency(votes) // outside the lock
	}
	rs := &c.rivals
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.keys == nil {
		rs.keys = map[string]*rival{}
	}
	r := rs.keys[key]
	if r == nil {
		r = &rival{}
		rs.keys[key] = r
	}
	if !won {
		if woken {
			r.losses++
		}
		r.contended = true
		return
	}
	r.losses, r.unit = 0, unit
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
