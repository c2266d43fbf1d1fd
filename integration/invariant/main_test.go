// Package invariant checks the library's promise through its public API
// only, against 5 real redis-server nodes: a Lock that reports held is
// held on a quorum of nodes for at least the validity it reports, and no
// two Locks of one key that exclude each other report held at once
// (readers share, the entries of one reentrant hold share, a semaphore
// of n permits admits n). A randomized concurrent workload of every lock
// type runs under node faults (TestInvariant); focused tests reproduce
// single races deterministically or nearly so.
package invariant

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
)

func TestMain(m *testing.M) {
	harness.QuietRedisLogs()
	goleak.VerifyTestMain(m, append(harness.IgnoreRedial(), harness.IgnoreRedisDial())...)
}

// keptNodes is how many nodes (the last ones) the Clients reach through
// connection-keeping proxies.
const keptNodes = 2

// cluster is 5 nodes, the first persist of them with appendonly (a restart
// keeps their keys), each behind a fault proxy that the Clients use (the
// checker reads the nodes directly). Every node has the documented ACL user
// for the lock types (user locker, from an ACL file, so that it survives
// restarts): one Client connects as that user (aclURLs). The ACL file
// leaves the default user unrestricted: the nemesis and the checker connect
// as it (CONFIG, REPLICAOF, other applications' keys).
//
// One persistent node (fo, if not -1) has a replica, also persistent, that
// it feeds from the start: a fail-over points its proxy at the replica (see
// nemesis), after which the two swap roles.
type cluster struct {
	nodes   []*harness.Node // node i's server now (fo: its primary); the nemesis's alone once the test runs
	proxies []*harness.Proxy
	persist int

	fo      int
	replica *harness.Node // fo's replica (the nemesis's alone)
	mu      sync.Mutex
	up      []string // where each proxy leads
}

// replArgs are the fail-over pair's arguments beyond the others': a replica
// syncs at once (no wait for more replicas to join a diskless sync).
var replArgs = []string{"--repl-diskless-sync-delay", "0"}

func startCluster(t testing.TB, persist int) *cluster {
	t.Helper()
	return startReplicated(t, persist, -1)
}

// startReplicated is startCluster with a replica for node fo (persistent:
// fo < persist; -1 none).
func startReplicated(t testing.TB, persist, fo int) *cluster {
	t.Helper()
	if fo >= persist {
		t.Fatalf("the fail-over node %d must be persistent (0..%d)", fo, persist-1)
	}
	cl := &cluster{persist: persist, fo: fo}
	lines, err := harness.DocACLLines("../../docs/deployment.md", "locker")
	if err != nil {
		t.Fatal(err)
	}
	acl, err := harness.ACLFile(t.TempDir(), lines[len(lines)-1]) // the lock types' line: every key of the workload
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--aclfile", acl}
	for i := 0; i < 5; i++ {
		cfg := harness.Config{Persist: i < persist, Args: args}
		if i == fo {
			cfg.Args = append(append([]string(nil), args...), replArgs...)
		}
		cl.nodes = append(cl.nodes, harness.Start(t, 1, cfg)...)
		if i == fo {
			cl.replica = harness.Start(t, 1, cfg)[0]
			if err := replicate(cl.replica, cl.nodes[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, n := range cl.nodes {
		cl.up = append(cl.up, n.Addr)
	}
	for i := range cl.nodes {
		upstream := func() string {
			cl.mu.Lock()
			defer cl.mu.Unlock()
			return cl.up[i]
		}
		// The last two nodes, and the fail-over node, sit behind proxies
		// that keep the Clients' connections across their restarts (a
		// Redis-aware proxy or sidecar): only the votes themselves show
		// those restarts (and the fail-over).
		newProxy := harness.NewProxy
		if i >= len(cl.nodes)-keptNodes || i == fo {
			newProxy = harness.NewKeepingProxy
		}
		p, err := newProxy(upstream)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		cl.proxies = append(cl.proxies, p)
	}
	return cl
}

// lead points node i's proxy at server n (a fail-over).
func (cl *cluster) lead(i int, n *harness.Node) {
	cl.mu.Lock()
	cl.up[i] = n.Addr
	cl.mu.Unlock()
}

// admin is a connection to server addr as the default user, for the
// nemesis and the tests' own commands; the caller closes it.
func admin(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
}

// replicate makes r a replica of primary and waits (at most 20 s) until
// it holds primary's data.
func replicate(r, primary *harness.Node) error {
	a := admin(r.Addr)
	defer a.Close()
	ctx, cancel := bg(20 * time.Second)
	defer cancel()
	host, port, _ := strings.Cut(primary.Addr, ":")
	if err := a.Do(ctx, "replicaof", host, port).Err(); err != nil {
		return fmt.Errorf("REPLICAOF on %s: %w", r.Addr, err)
	}
	return waitSynced(ctx, a)
}

// waitSynced waits until the replica a reaches has its primary's data
// (master_link_status up, not syncing), or ctx ends.
func waitSynced(ctx context.Context, a *redis.Client) error {
	for {
		info, err := a.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") && strings.Contains(info, "master_sync_in_progress:0") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replica %s not in sync: %v (%v)", a.Options().Addr, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (cl *cluster) urls() []string {
	u := make([]string, len(cl.proxies))
	for i, p := range cl.proxies {
		u[i] = p.URL()
	}
	return u
}

// aclURLs are urls as the documented ACL user (password s3cret).
func (cl *cluster) aclURLs() []string {
	u := cl.urls()
	for i := range u {
		u[i] = strings.Replace(u[i], "redis://", "redis://locker:s3cret@", 1)
	}
	return u
}

func (cl *cluster) latency(d time.Duration) {
	for _, p := range cl.proxies {
		p.SetLatency(d)
	}
}

// newClient makes a Client over urls; the test closes it (closeGuarded):
// a Close that never returns must fail the test, not hang it.
func newClient(t testing.TB, urls []string, opts ...redlock.Option) *redlock.Client {
	t.Helper()
	c, err := harness.NewClient(t, urls, append([]redlock.Option{redlock.WithNodeTimeout(time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// guard runs f and reports whether it returned within d. It is a failure
// guard only: d is far beyond what f needs on any machine.
func guard(d time.Duration, f func()) bool {
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// closeGuarded closes c, failing the test if Close does not return.
func closeGuarded(t testing.TB, name string, c *redlock.Client) {
	t.Helper()
	if !guard(30*time.Second, func() { _ = c.Close() }) {
		dumpStacks(t)
		t.Errorf("%s: Close did not return within 30s (wedged)", name)
	}
}

// dumpStacks writes every goroutine's stack to a file for a wedge.
func dumpStacks(t testing.TB) {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	f, err := os.CreateTemp("", "invariant-stacks-*.txt")
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.Write(buf)
	t.Logf("goroutine stacks: %s", f.Name())
}

func bg(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
