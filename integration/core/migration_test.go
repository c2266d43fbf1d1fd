package core

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
)

// A rolling migration from go-redsync: old instances (go-redsync v4) and
// new ones (this library) take one key on the same five nodes. They
// exclude each other (both write the key with SET NX and delete only their
// own value); go-redsync's locks are in no TTL register, so after two of
// the three nodes that hold a go-redsync lock restart empty, a new
// instance with default options takes the key while go-redsync's 10 s lock
// is valid (the registers show no window: the double grant, the scenario's
// sanity case). With the setting
// docs/migration.md gives for a mixed deployment, the setting floor, it stays out.
func TestMigrationFromRedsync(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []redlock.Option
		safe bool
	}{
		{"default options: the double grant", nil, false},
		{"setting floor", []redlock.Option{redlock.WithRestartQuarantine(15*time.Second, redlock.QuarantineSettingFloor)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			nodes := harness.Start(t, 5, harness.Config{})
			// go-redsync reaches nodes 3 and 4 through proxies that refuse
			// while it locks: its lock is on a bare quorum, 0, 1 and 2.
			ps, urls := proxies(t, nodes, false)
			pools := make([]rsredis.Pool, len(nodes))
			for i, u := range urls {
				opt, err := redis.ParseURL(u)
				if err != nil {
					t.Fatal(err)
				}
				opt.MaxRetries = -1
				cl := redis.NewClient(opt)
				t.Cleanup(func() { _ = cl.Close() })
				pools[i] = rsgoredis.NewPool(cl)
			}
			c := client(t, nodes, tc.opts...)
			warm, err := c.TryLock(ctx, "mig:warm", 2*time.Second) // knows every node's process
			if err != nil {
				t.Fatal(err)
			}
			_ = warm.Release(ctx)
			ps[3].Set(harness.Refuse)
			ps[4].Set(harness.Refuse)
			old := redsync.New(pools...).NewMutex("mig:k", redsync.WithExpiry(10*time.Second), redsync.WithTries(1))
			if err := old.LockContext(ctx); err != nil {
				t.Fatal(err)
			}
			ps[3].Heal()
			ps[4].Heal()
			until := time.Now().Add(10 * time.Second)
			if _, err := c.TryLock(ctx, "mig:k", 2*time.Second); !errors.Is(err, redlock.ErrNotObtained) {
				t.Fatalf("new instance while go-redsync holds the key: %v, want ErrNotObtained", err)
			}
			for _, n := range nodes[:2] {
				if err := n.Restart(); err != nil {
					t.Fatal(err)
				}
			}
			var got *redlock.Lock
			for end := time.Now().Add(4 * time.Second); got == nil && time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
				got, _ = c.TryLock(ctx, "mig:k", 2*time.Second)
			}
			switch {
			case got != nil && tc.safe:
				t.Fatalf("a second holder with %v of go-redsync's lock left", time.Until(until).Round(time.Millisecond))
			case got == nil && !tc.safe:
				t.Fatal("no double grant without the setting: the scenario does not reach what the setting guards against")
			case got != nil:
				t.Logf("default options: second holder with %v of go-redsync's lock left", time.Until(until).Round(time.Millisecond))
				_ = got.Release(ctx)
			}
		})
	}
}
