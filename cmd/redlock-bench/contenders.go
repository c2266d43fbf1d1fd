package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/observe"
)

// contender is one lock implementation under test. lock blocks until
// acquired or ctx is done; try makes one attempt.
type contender interface {
	name() string
	try(ctx context.Context, key string) (unlock func() error, err error)
	lock(ctx context.Context, key string) (unlock func() error, err error)
	close()
}

const benchTTL = 10 * time.Second

// ours: this library with its defaults (and opts, under another label).
type ours struct {
	c     *redlock.Client
	label string
	call  []redlock.LockOption // given to every Lock and TryLock
}

func newOurs(urls []string, opts ...redlock.Option) (*ours, error) {
	return newOursAs("redlock", urls, opts...)
}

func newOursAs(label string, urls []string, opts ...redlock.Option) (*ours, error) {
	c, err := redlock.NewFromURLs(urls, opts...)
	if err != nil {
		return nil, err
	}
	return &ours{c: c, label: label}, nil
}

func (o *ours) name() string { return o.label }
func (o *ours) try(ctx context.Context, key string) (func() error, error) {
	l, err := o.c.TryLock(ctx, key, benchTTL, o.call...)
	if err != nil {
		return nil, err
	}
	return func() error { return l.Release(context.Background()) }, nil
}
func (o *ours) lock(ctx context.Context, key string) (func() error, error) {
	l, err := o.c.Lock(ctx, key, benchTTL, o.call...)
	if err != nil {
		return nil, err
	}
	return func() error { return l.Release(context.Background()) }, nil
}
func (o *ours) close() { _ = o.c.Close() }

// handoffer is a contender that counts how its waits ended and the locks
// it passed on without a round trip (ours).
type handoffer interface{ handoffStats() observe.HandoffStats }

func (o *ours) handoffStats() observe.HandoffStats { return o.c.Stats().Handoff }

// HandoffStat is what our hand-off did during a run: counter deltas of
// Client.HandoffStats.
type HandoffStat struct {
	Passed      float64 `json:"passed"`       // acquisitions passed on by a local Release, with no round trip
	PassedShare float64 `json:"passed_share"` // Passed / acquisitions
	Notified    float64 `json:"notified"`     // waits ended by the nodes' release notification
	Local       float64 `json:"local"`        // waits ended by a release in this process
	Promoted    float64 `json:"promoted"`     // waits ended because the previous waiter left
	Timer       float64 `json:"timer"`        // waits ended by the backoff timer (the polling fallback)
}

// handoffDelta is the hand-off counters from a to b, for acq acquisitions.
func handoffDelta(a, b observe.HandoffStats, acq int) *HandoffStat {
	h := &HandoffStat{Passed: float64(b.Handed - a.Handed), Notified: float64(b.Notified - a.Notified),
		Local: float64(b.Local - a.Local), Promoted: float64(b.Promoted - a.Promoted), Timer: float64(b.Timer - a.Timer)}
	if acq > 0 {
		h.PassedShare = h.Passed / float64(acq)
	}
	return h
}

// add sums hand-off counters (of several processes).
func (h *HandoffStat) add(o *HandoffStat) {
	h.Passed += o.Passed
	h.Notified += o.Notified
	h.Local += o.Local
	h.Promoted += o.Promoted
	h.Timer += o.Timer
}

// contenderByName makes one contender ("redlock", "redlock-fair" (every
// Lock with Fair), "redsync" or "single-node", the last on the first
// node).
func contenderByName(lib string, urls []string) (contender, error) {
	switch lib {
	case "redlock":
		return newOurs(urls)
	case "redlock-fair":
		o, err := newOursAs(lib, urls)
		if err == nil {
			o.call = []redlock.LockOption{redlock.Fair()}
		}
		return o, err
	case "redsync":
		return newRsync(urls)
	case "single-node":
		return newSingle(urls[0])
	}
	if n, ok := handoffN(lib); ok {
		return newOursAs(lib, urls, redlock.WithLocalHandoff(n, 0))
	}
	return nil, unknownContender(lib)
}

func unknownContender(lib string) error {
	return fmt.Errorf("unknown contender %q (have redlock, redlock-fair, redsync, single-node, redlock-handoff-N)", lib)
}

// knownContender reports whether contenderByName knows lib.
func knownContender(lib string) bool {
	switch lib {
	case "redlock", "redlock-fair", "redsync", "single-node":
		return true
	}
	_, ok := handoffN(lib)
	return ok
}

// handoffN parses "redlock-handoff-N": this library with
// WithLocalHandoff(N, 0), to measure what the cap on local passes does.
func handoffN(lib string) (int, bool) {
	var n int
	if _, err := fmt.Sscanf(lib, "redlock-handoff-%d", &n); err != nil || n < 0 || lib != fmt.Sprintf("redlock-handoff-%d", n) {
		return 0, false
	}
	return n, true
}

// rsync: go-redsync v4 with its defaults (32 tries, 50-250ms retry delay,
// drift factor 0.01, no fail-fast), over go-redis v9 clients with default
// options, as its README shows. Mutexes are cached per key and goroutine.
type rsync struct {
	rs      *redsync.Redsync
	clients []*redis.Client
}

func newRsync(urls []string) (*rsync, error) {
	r := &rsync{}
	var ps []rsredis.Pool
	for _, u := range urls {
		opt, err := redis.ParseURL(u)
		if err != nil {
			return nil, err
		}
		c := redis.NewClient(opt)
		r.clients = append(r.clients, c)
		ps = append(ps, goredis.NewPool(c))
	}
	r.rs = redsync.New(ps...)
	return r, nil
}

func (r *rsync) name() string { return "redsync" }
func (r *rsync) try(ctx context.Context, key string) (func() error, error) {
	m := r.rs.NewMutex(key, redsync.WithExpiry(benchTTL), redsync.WithTries(1))
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return func() error { _, err := m.UnlockContext(context.Background()); return err }, nil
}
func (r *rsync) lock(ctx context.Context, key string) (func() error, error) {
	for {
		m := r.rs.NewMutex(key, redsync.WithExpiry(benchTTL))
		err := m.LockContext(ctx)
		if err == nil {
			return func() error { _, err := m.UnlockContext(context.Background()); return err }, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// ErrFailed after its 32 tries: try again, as a caller would.
	}
}
func (r *rsync) close() {
	for _, c := range r.clients {
		_ = c.Close()
	}
}

// single: the floor, one node, SET NX PX and a compare-and-delete script.
type single struct{ c *redis.Client }

var releaseScript = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

func newSingle(url string) (*single, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	opt.ContextTimeoutEnabled = true
	return &single{redis.NewClient(opt)}, nil
}

var errHeld = errors.New("held")

func (s *single) name() string { return "single-node" }
func (s *single) try(ctx context.Context, key string) (func() error, error) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	v := hex.EncodeToString(b[:])
	ok, err := s.c.SetNX(ctx, key, v, benchTTL).Result()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errHeld
	}
	return func() error { return releaseScript.Run(context.Background(), s.c, []string{key}, v).Err() }, nil
}
func (s *single) lock(ctx context.Context, key string) (func() error, error) {
	for {
		u, err := s.try(ctx, key)
		if err == nil {
			return u, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		time.Sleep(time.Duration(1+mrand.IntN(4)) * time.Millisecond)
	}
}
func (s *single) close() { _ = s.c.Close() }

func newContenders(urls []string) ([]contender, error) {
	o, err := newOurs(urls)
	if err != nil {
		return nil, err
	}
	r, err := newRsync(urls)
	if err != nil {
		return nil, err
	}
	s, err := newSingle(urls[0])
	if err != nil {
		return nil, err
	}
	return []contender{o, r, s}, nil
}

func closeContenders(cs []contender) {
	for _, c := range cs {
		c.close()
	}
}
