package main

import (
	"context"
	"errors"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// The locks users pick instead of a quorum, each set up as its README
// shows and run on ONE node (the first): they guarantee mutual exclusion
// only while that node keeps its data. Beside redlock and go-redsync they
// tell what the quorum of independent nodes costs.

// Contender names (map keys in results.json, key prefixes in Redis).
const (
	bsmName     = "bsm-redislock"
	rueidisName = "rueidislock"
)

// libLabels are the column and row labels of results.md: what each
// contender guarantees.
var libLabels = map[string]string{
	"redlock":     "redlock",
	"redsync":     "redsync",
	"single-node": "single-node",
	bsmName:       "bsm/redislock (1 node)",
	rueidisName:   "rueidislock (1 node)",
}

func label(lib string) string {
	if l, ok := libLabels[lib]; ok {
		return l
	}
	return lib
}

// altLibs are the single-node alternatives, in table order.
var altLibs = []string{bsmName, rueidisName}

// guarantees is the legend under the tables that have the alternatives.
const guarantees = "Legend, what each guarantees: **redlock** and **redsync** hold a lock on a majority of N independent nodes (it survives the loss of a minority of them); " +
	"**single-node** (plain SET NX + compare-and-delete), **bsm/redislock (1 node)** and **rueidislock (1 node)** hold it on the first node only " +
	"(lost if that node fails, restarts without its data or fails over). rueidislock is configured as its README says for one Redis instance (KeyMajority 1, NoLoopTracking); " +
	"its default KeyMajority 2 takes 2 of 3 keys, still on one deployment: not independent nodes. The gap between the 1-node rows and redlock is what the quorum costs.\n\n"

// bsmLock: github.com/bsm/redislock over one go-redis v9 client, as its
// README shows: Obtain (no retry) and Release.
type bsmLock struct {
	c      *redis.Client
	locker *redislock.Client
}

func newBsm(url string) (*bsmLock, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	c := redis.NewClient(opt)
	return &bsmLock{c: c, locker: redislock.New(c)}, nil
}

func (b *bsmLock) name() string { return bsmName }
func (b *bsmLock) obtain(ctx context.Context, key string, opt *redislock.Options) (func() error, error) {
	l, err := b.locker.Obtain(ctx, key, benchTTL, opt)
	if err != nil {
		return nil, err
	}
	return func() error { return l.Release(context.Background()) }, nil
}
func (b *bsmLock) try(ctx context.Context, key string) (func() error, error) {
	return b.obtain(ctx, key, nil)
}

// lock retries every millisecond until ctx ends (the README's retry
// example uses LinearBackoff; 1 ms is the single-node floor's rate, so
// that a hot key is not judged on a long backoff).
func (b *bsmLock) lock(ctx context.Context, key string) (func() error, error) {
	for {
		u, err := b.obtain(ctx, key, &redislock.Options{RetryStrategy: redislock.LinearBackoff(time.Millisecond)})
		if err == nil || ctx.Err() != nil {
			return u, err
		}
		if !errors.Is(err, redislock.ErrNotObtained) && !errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		// Obtain gave up at its own deadline (the TTL, when ctx has none): again.
	}
}
func (b *bsmLock) close() { _ = b.c.Close() }

// rueidisLock: rueidislock as its README shows for one Redis instance
// (KeyMajority 1, NoLoopTracking for Redis >= 7.0.5). The lock is a
// context, extended in the background; cancel releases it and returns
// once the key is deleted. WithContext waits for the holder's release
// through client-side caching invalidations.
type rueidisLock struct{ l rueidislock.Locker }

func newRueidis(url string) (*rueidisLock, error) {
	opt, err := rueidis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	l, err := rueidislock.NewLocker(rueidislock.LockerOption{ClientOption: opt, KeyMajority: 1, NoLoopTracking: true})
	if err != nil {
		return nil, err
	}
	return &rueidisLock{l}, nil
}

func (r *rueidisLock) name() string { return rueidisName }
func (r *rueidisLock) try(ctx context.Context, key string) (func() error, error) {
	_, cancel, err := r.l.TryWithContext(ctx, key)
	if err != nil {
		return nil, err
	}
	return func() error { cancel(); return nil }, nil
}
func (r *rueidisLock) lock(ctx context.Context, key string) (func() error, error) {
	_, cancel, err := r.l.WithContext(ctx, key)
	if err != nil {
		return nil, err
	}
	return func() error { cancel(); return nil }, nil
}
func (r *rueidisLock) close() { r.l.Close() }

// newAltContenders are the single-node alternatives on url (the first
// node).
func newAltContenders(url string) ([]contender, error) {
	b, err := newBsm(url)
	if err != nil {
		return nil, err
	}
	r, err := newRueidis(url)
	if err != nil {
		b.close()
		return nil, err
	}
	return []contender{b, r}, nil
}

// newAllContenders are redlock, go-redsync and single-node on urls, and
// the single-node alternatives on the first.
func newAllContenders(urls []string) ([]contender, error) {
	cs, err := newContenders(urls)
	if err != nil {
		return nil, err
	}
	alt, err := newAltContenders(urls[0])
	if err != nil {
		closeContenders(cs)
		return nil, err
	}
	return append(cs, alt...), nil
}
