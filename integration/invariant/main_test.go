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
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
)

func TestMain(m *testing.M) {
	harness.QuietRedisLogs()
	goleak.VerifyTestMain(m, harness.IgnoreRedisDial())
}

// keptNodes is how many nodes (the last ones) the Clients reach through
// connection-keeping proxies.
const keptNodes = 2

// cluster is 5 nodes, the first persist of them with appendonly (a restart
// keeps their keys), each behind a fault proxy that the Clients use (the
// checker reads the nodes directly). Every node has the documented ACL user
// for the lock types (user locker, from an ACL file, so that it survives
// restarts): one Client connects as that user (aclURLs).
type cluster struct {
	nodes   []*harness.Node
	proxies []*harness.Proxy
	persist int
}

func startCluster(t testing.TB, persist int) *cluster {
	t.Helper()
	cl := &cluster{persist: persist}
	lines, err := harness.DocACLLines("../../docs/deployment.md", "locker")
	if err != nil {
		t.Fatal(err)
	}
	acl, err := harness.ACLFile(t.TempDir(), lines[len(lines)-1]) // the lock types' line: every key of the workload
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--aclfile", acl}
	if persist > 0 {
		cl.nodes = harness.Start(t, persist, harness.Config{Persist: true, Args: args})
	}
	cl.nodes = append(cl.nodes, harness.Start(t, 5-persist, harness.Config{Args: args})...)
	for i, n := range cl.nodes {
		addr := n.Addr
		// The last two nodes sit behind proxies that keep the Clients'
		// connections across their restarts (a Redis-aware proxy or
		// sidecar): only the votes themselves show those restarts.
		newProxy := harness.NewProxy
		if i >= len(cl.nodes)-keptNodes {
			newProxy = harness.NewKeepingProxy
		}
		p, err := newProxy(func() string { return addr })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		cl.proxies = append(cl.proxies, p)
	}
	return cl
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
	c, err := redlock.NewFromURLs(urls, append([]redlock.Option{redlock.WithNodeTimeout(time.Second)}, opts...)...)
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
