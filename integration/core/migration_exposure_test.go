package core

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
)

// What a mixed fleet does not promise: go-redsync counts a node that
// restarted empty at once. A new instance holds a 10 s lock on a bare
// quorum (nodes 0, 1, 2: it reached 3 and 4 not at all); nodes 0 and 1
// restart empty; a go-redsync mutex then takes the key on nodes 0, 1, 3
// and 4 while the lock is valid. A fixed-TTL holder does not learn of it
// (its Err stays nil) until Release, which cannot confirm a quorum
// (ErrNotHeld); a watchdog holder's next renewal finds the lock lost
// (maybe already before go-redsync's lock: the restarts took it).
// The quarantine setting floor does not help: it keeps restarted nodes
// out of this library's quorums, not of go-redsync's.
func TestMigrationRedsyncTakesOverAfterRestarts(t *testing.T) {
	for _, watchdog := range []bool{false, true} {
		name := map[bool]string{false: "fixed TTL", true: "watchdog"}[watchdog]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			nodes := harness.Start(t, 5, harness.Config{})
			ps, urls := proxies(t, nodes, false)
			c, err := harness.NewClient(t, urls, redlock.WithNodeTimeout(time.Second),
				redlock.WithRestartQuarantine(15*time.Second, redlock.QuarantineSettingFloor),
				redlock.WithWatchdog(10*time.Second, 200*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			warm, err := c.TryLock(ctx, "mig:warm", 2*time.Second) // knows every node's process
			if err != nil {
				t.Fatal(err)
			}
			_ = warm.Release(ctx)
			ps[3].Set(harness.Refuse)
			ps[4].Set(harness.Refuse)
			ttl := 10 * time.Second
			if watchdog {
				ttl = redlock.Watchdog
			}
			l, err := c.TryLock(ctx, "mig:k", ttl)
			if err != nil {
				t.Fatal(err)
			}
			ps[3].Heal()
			ps[4].Heal()
			for _, n := range nodes[:2] {
				if err := n.Restart(); err != nil {
					t.Fatal(err)
				}
			}
			m := redsync.New(redsyncPools(t, nodes)...).NewMutex("mig:k", redsync.WithExpiry(8*time.Second), redsync.WithTries(1))
			if err := m.LockContext(ctx); err != nil {
				t.Fatalf("go-redsync after two of the lock's three nodes restarted empty: %v, want the second hold the page warns of", err)
			}
			defer m.UnlockContext(ctx)
			if !watchdog {
				left := l.Remaining()
				t.Logf("%s: go-redsync took the key with %v of the new instance's lock left", name, left.Round(100*time.Millisecond))
				if left <= 0 {
					t.Fatalf("the lock had run out (%v left): no double grant to show", left)
				}
				if err := l.Err(); err != nil {
					t.Errorf("fixed-TTL holder's Err after the take-over: %v, want nil (it cannot know)", err)
				}
				if err := l.Release(ctx); !errors.Is(err, redlock.ErrNotHeld) {
					t.Errorf("Release after the take-over: %v, want ErrNotHeld", err)
				}
				return
			}
			// A renewal may have found the lock lost already, between the
			// restarts and go-redsync's lock: it needs no more than that.
			select {
			case <-l.Done():
				if !errors.Is(l.Err(), redlock.ErrLockLost) {
					t.Errorf("watchdog holder's Err: %v, want ErrLockLost", l.Err())
				}
			case <-time.After(3 * time.Second):
				t.Errorf("watchdog holder not told within 3 s (renewals every 200 ms); Err %v", l.Err())
			}
		})
	}
}
