package topology

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/observe"
)

// The ACL lines of docs/deployment.md, read from that page itself, so
// that a user made from exactly what the documentation says is what is
// tested:
// aclLine to lock, aclHandoffLine to lock with release notifications,
// typesACLLine for every lock type.
var aclLine, aclHandoffLine, typesACLLine string

// aclCommands are the commands aclLine grants that a short cycle uses: all
// but +config|get (optional: refused, a node is taken not to fsync every
// write) and +hdel (deletes register entries that expired).
var aclCommands []string

func loadACLLines() error {
	lines, err := harness.DocACLLines("../../docs/deployment.md", "locker")
	if err != nil {
		return err
	}
	if len(lines) != 3 {
		return fmt.Errorf("docs/deployment.md has %d ACL SETUSER locker lines, want 3 (lock, notifications, types): %q", len(lines), lines)
	}
	aclLine, aclHandoffLine, typesACLLine = lines[0], lines[1], lines[2]
	aclCommands = nil
	for _, f := range strings.Fields(aclLine) {
		if c, ok := strings.CutPrefix(f, "+"); ok && c != "config|get" && c != "hdel" {
			aclCommands = append(aclCommands, c)
		}
	}
	return nil
}

// setUser runs line (an ACL SETUSER command) on the server at addr, after
// dropping the user and the script cache (so the first EVALSHA gets
// NOSCRIPT and the library falls back to EVAL).
func setUser(t testing.TB, addr string, line string) {
	t.Helper()
	admin := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer admin.Close()
	ctx := context.Background()
	var args []interface{}
	for _, f := range strings.Fields(line) {
		args = append(args, f)
	}
	for _, cmd := range [][]interface{}{{"acl", "deluser", "locker"}, {"script", "flush"}, args} {
		if err := admin.Do(ctx, cmd...).Err(); err != nil {
			t.Fatalf("%s on %s: %v", cmd, addr, err)
		}
	}
}

// lockerURLs returns redis://locker:s3cret@ URLs of nodes.
func lockerURLs(nodes []*harness.Node) []string {
	u := make([]string, len(nodes))
	for i, n := range nodes {
		u[i] = "redis://locker:s3cret@" + n.Addr
	}
	return u
}

// With only aclLine's permissions, the library's whole cycle works: a
// single key through NewFromURLs (no retries: SET NX), a single key through
// clients that retry (the lock script), several keys; lock, extend and
// release, each on a node with an empty script cache. A key outside the
// pattern fails with NOPERM in every node's result.
func TestACLUser(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	admins := make([]redis.Cmdable, len(nodes))
	lockers := make([]redis.UniversalClient, len(nodes)) // go-redis defaults: MaxRetries 3
	for i, n := range nodes {
		setUser(t, n.Addr, aclLine)
		a := n.Client()
		lockers[i] = redis.NewClient(&redis.Options{Addr: n.Addr, Username: "locker", Password: "s3cret", ContextTimeoutEnabled: true})
		closeAll(t, a, lockers[i])
		admins[i] = a
	}
	byURL, err := redlock.NewFromURLs(lockerURLs(nodes), redlock.WithNodeTimeout(nodeTimeout), redlock.WithQuorum(redlock.AllNodes))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = byURL.Close() })
	retrying := newClient(t, lockers, redlock.WithQuorum(redlock.AllNodes))
	ctx := context.Background()

	cycle := func(t *testing.T, c *redlock.Client, keys []string) {
		l, err := c.LockKeys(ctx, keys, ttl)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			for i, a := range admins {
				if got := get(t, a, k); got != l.Owner() {
					t.Errorf("node %d: %s = %q, want the owner %q", i, k, got, l.Owner())
				}
			}
		}
		if err := l.Extend(ctx, 2*ttl); err != nil {
			t.Fatal(err)
		}
		for i, a := range admins {
			if d := pttl(t, a, keys[0]); d <= ttl {
				t.Errorf("node %d: PTTL after Extend(%v) = %v, want > %v", i, 2*ttl, d, ttl)
			}
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			absent(t, k, admins...)
		}
	}
	t.Run("single key, no retries", func(t *testing.T) { cycle(t, byURL, []string{"lock:acl-1"}) })
	t.Run("single key, retries", func(t *testing.T) { cycle(t, retrying, []string{"lock:acl-2"}) })
	t.Run("several keys", func(t *testing.T) { cycle(t, byURL, []string{"lock:acl-3", "lock:acl-4"}) })

	t.Run("key outside the pattern", func(t *testing.T) {
		for name, c := range map[string]*redlock.Client{"no retries": byURL, "retries": retrying} {
			const key = "orders:acl-5"
			_, err := c.TryLock(ctx, key, ttl)
			var qe *redlock.QuorumError
			if !errors.Is(err, redlock.ErrNotObtained) || !errors.As(err, &qe) {
				t.Fatalf("%s: TryLock(%q): %v, want a QuorumError matching ErrNotObtained", name, key, err)
			}
			// The round is decided at the first refusal (AllNodes);
			// every node that answered by then refused with NOPERM.
			answered := 0
			for i, r := range qe.Nodes {
				if errors.Is(r.Err, observe.ErrPending) {
					continue
				}
				answered++
				var re redis.Error
				if r.Vote || !errors.As(r.Err, &re) || !strings.HasPrefix(re.Error(), "NOPERM") {
					t.Errorf("%s: node %d (%s): vote %v, err %v; want a NOPERM error", name, i, r.Addr, r.Vote, r.Err)
				}
			}
			if answered == 0 {
				t.Errorf("%s: no node answered: %v", name, err)
			}
			if !strings.Contains(err.Error(), "NOPERM this user has no permissions to access one of the keys") {
				t.Errorf("%s: error does not say why: %v", name, err)
			}
			absent(t, key, admins...)
		}
	})
}

// Every command of aclLine is needed: without any one of them some step
// of the cycle (on a node with an empty script cache) fails with a
// permission error on that node.
func TestACLEveryCommandIsNeeded(t *testing.T) {
	n := harness.Start(t, 1, harness.Config{})[0]
	admin := n.Client()
	closeAll(t, admin)
	ctx := context.Background()

	// cycle runs every operation the library has, on new Clients (which
	// identify the node and publish their TTLs) over an empty node, and
	// returns the first failure.
	cycle := func() error {
		defer admin.FlushAll(ctx)
		byURL, err := redlock.NewFromURLs(lockerURLs([]*harness.Node{n}), redlock.WithNodeTimeout(nodeTimeout))
		if err != nil {
			t.Fatal(err)
		}
		defer byURL.Close()
		locker := redis.NewClient(&redis.Options{Addr: n.Addr, Username: "locker", Password: "s3cret", ContextTimeoutEnabled: true})
		defer locker.Close()
		retrying, err := redlock.New([]redis.UniversalClient{locker}, redlock.WithNodeTimeout(nodeTimeout))
		if err != nil {
			t.Fatal(err)
		}
		defer retrying.Close()
		for _, step := range []struct {
			c    *redlock.Client
			keys []string
		}{{byURL, []string{"lock:n-1"}}, {retrying, []string{"lock:n-2"}}, {byURL, []string{"lock:n-3", "lock:n-4"}}} {
			l, err := step.c.TryLockKeys(ctx, step.keys, ttl)
			if err != nil {
				return err
			}
			if err := l.Extend(ctx, ttl); err != nil {
				return err
			}
			if err := l.Release(ctx); err != nil {
				return err
			}
		}
		return nil
	}
	setUser(t, n.Addr, aclLine)
	if err := cycle(); err != nil {
		t.Fatalf("with %q: %v", aclLine, err)
	}
	for _, cmd := range aclCommands {
		line := strings.Replace(aclLine, " +"+cmd+" ", " ", 1)
		if strings.HasSuffix(line, " +"+cmd) {
			line = strings.TrimSuffix(line, " +"+cmd)
		}
		if line == aclLine {
			t.Fatalf("%q is not in the ACL line", cmd)
		}
		setUser(t, n.Addr, line)
		err := cycle()
		var qe *redlock.QuorumError
		if !errors.As(err, &qe) {
			t.Errorf("without +%s: %v, want a QuorumError", cmd, err)
			continue
		}
		// A command refused as sent: NOPERM; one refused inside a
		// script: the script's error (Redis 7.0 words it as below).
		msg := qe.Nodes[0].Err.Error()
		if !strings.Contains(msg, "NOPERM this user has no permissions to run the '"+cmd+"' command") &&
			!strings.Contains(msg, "The user executing the script can't run this command") {
			t.Errorf("without +%s: node error %q, want a permission error", cmd, msg)
		}
		t.Logf("without +%s: %s: %s", cmd, qe.Op, msg)
	}
}

// With only aclLine's permissions, a coalescing Client (the default) under
// load works as it does one call at a time: 16 goroutines each try and
// release 30 locks on keys they share (so some tries find the key held)
// on one Client. Every failed try is ErrNotObtained with each node saying
// no (or not yet answered): no node error at all, in particular no
// NOPERM. A command the user may not run in a node's pipeline would fail
// there, and a pipeline that reported one command's error for all of them
// would turn granted locks into errors (and leave their keys behind).
// Once every lock is released and the Client closed, no key is left.
func TestACLUserCoalescedBurst(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	admins := make([]redis.UniversalClient, len(nodes))
	lockers := make([]redis.UniversalClient, len(nodes)) // go-redis defaults: MaxRetries 3
	for i, n := range nodes {
		setUser(t, n.Addr, aclLine)
		admins[i] = n.Client()
		lockers[i] = redis.NewClient(&redis.Options{Addr: n.Addr, Username: "locker", Password: "s3cret", ContextTimeoutEnabled: true})
		closeAll(t, admins[i], lockers[i])
	}
	t.Run("no retries", func(t *testing.T) {
		c, err := redlock.NewFromURLs(lockerURLs(nodes), redlock.WithNodeTimeout(nodeTimeout))
		if err != nil {
			t.Fatal(err)
		}
		burst(t, c, "lock:burst-a-", admins)
	})
	t.Run("retries", func(t *testing.T) {
		c, err := redlock.New(lockers, redlock.WithNodeTimeout(nodeTimeout))
		if err != nil {
			t.Fatal(err)
		}
		burst(t, c, "lock:burst-b-", admins)
	})
}

// burst runs 16 goroutines x 30 TryLock and Release on c (keys prefix+j,
// shared by the goroutines), closes c, checks every failure and that no
// key with prefix is left on admins' nodes.
func burst(t *testing.T, c *redlock.Client, prefix string, admins []redis.UniversalClient) {
	const goroutines, rounds = 16, 30
	var mu sync.Mutex
	var ok, held int
	var bad []error
	var wg sync.WaitGroup
	ctx := context.Background()
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < rounds; j++ {
				l, err := c.TryLock(ctx, fmt.Sprintf("%s%d", prefix, j), ttl)
				if err == nil {
					err = l.Release(ctx)
				}
				mu.Lock()
				switch {
				case l != nil && err == nil:
					ok++
				case l == nil && onlyHeld(err):
					held++
				default:
					bad = append(bad, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	_ = c.Close()
	left := leftKeys(t, prefix, admins)
	t.Logf("%d obtained and released, %d refused (key held), %d other errors, %d keys left",
		ok, held, len(bad), left)
	for i, err := range bad {
		if i == 5 {
			t.Errorf("... and %d more", len(bad)-i)
			break
		}
		t.Errorf("TryLock or Release: %v", err)
	}
	if left != 0 {
		t.Errorf("%d keys %s* left on the nodes after every lock was released", left, prefix)
	}
	if ok == 0 {
		t.Error("no lock obtained")
	}
}

// onlyHeld reports whether err is a refused acquisition where every node
// that answered said no without an error.
func onlyHeld(err error) bool {
	var qe *redlock.QuorumError
	if !errors.Is(err, redlock.ErrNotObtained) || !errors.As(err, &qe) || qe.Cause != nil {
		return false
	}
	for _, r := range qe.Nodes {
		if r.Err != nil && !errors.Is(r.Err, observe.ErrPending) && !errors.Is(r.Err, observe.ErrNodeSkipped) {
			return false
		}
	}
	return true
}

// leftKeys counts the keys with prefix on admins' nodes (SCAN).
func leftKeys(t *testing.T, prefix string, admins []redis.UniversalClient) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	for i, a := range admins {
		it := a.Scan(ctx, 0, prefix+"*", 100).Iterator()
		for it.Next(ctx) {
			n++
		}
		if err := it.Err(); err != nil {
			t.Fatalf("node %d: SCAN: %v", i, err)
		}
	}
	return n
}

// With the documented line for the lock types, every type's cycle works
// (lock, re-entry, extend, release); with the plain line, a typed lock
// fails with the script's permission error, never a corrupted key.
func TestACLLockTypes(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	for _, n := range nodes {
		setUser(t, n.Addr, typesACLLine)
	}
	c, err := redlock.NewFromURLs(lockerURLs(nodes), redlock.WithNodeTimeout(nodeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	for _, opt := range []redlock.LockOption{redlock.Reentrant(), redlock.ReadLock(), redlock.WriteLock(), redlock.Permits(2), redlock.Fair()} {
		l, err := c.Lock(ctx, "lock:typed", ttl, opt)
		if err != nil {
			t.Fatalf("lock: %v", err)
		}
		if l.Kind() == observe.KindReentrant {
			in, err := c.TryLock(redlock.WithLock(ctx, l), "lock:typed", ttl, opt)
			if err != nil {
				t.Fatalf("re-entry: %v", err)
			}
			if err := in.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Extend(ctx, ttl); err != nil {
			t.Fatalf("%s: extend: %v", l.Kind(), err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("%s: release: %v", l.Kind(), err)
		}
	}
	for _, n := range nodes {
		setUser(t, n.Addr, aclLine)
	}
	_, err = c.TryLock(ctx, "lock:typed2", ttl, redlock.ReadLock())
	if !errors.Is(err, redlock.ErrNotObtained) || !strings.Contains(err.Error(), "can't run this command") {
		t.Fatalf("a typed lock without its commands: %v", err)
	}
}
