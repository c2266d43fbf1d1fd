package topology

import (
	"context"
	"crypto/x509"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
)

// A node that speaks TLS only (--port 0 --tls-port), reached by a go-redis
// client whose TLSConfig trusts the test CA, serves as one of three
// Redlock nodes: lock, extend and release land on it.
func TestTLSNode(t *testing.T) {
	ca := harness.NewCAT(t)
	srv := harness.StartTLS(t, ca)
	plain := harness.Start(t, 2, harness.Config{})
	tc := srv.Client() // TLSConfig{RootCAs: the test CA}, ContextTimeoutEnabled
	p0, p1 := plain[0].Client(), plain[1].Client()
	closeAll(t, tc, p0, p1)
	ctx := context.Background()

	// The port really is TLS only: plain RESP gets no answer.
	pc := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	if err := pc.Ping(ctx).Err(); err == nil {
		t.Errorf("plain PING to the TLS port %s succeeded", srv.Addr)
	}
	_ = pc.Close()

	c := newClient(t, []redis.UniversalClient{tc, p0, p1}, redlock.WithQuorum(redlock.AllNodes))
	const key = "lock:tls-1"
	l, err := c.Lock(ctx, key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if r := l.Votes()[0]; !r.Vote || r.Err != nil {
		t.Errorf("TLS node: vote %v, err %v; want yes", r.Vote, r.Err)
	}
	for i, cmd := range []redis.Cmdable{tc, p0, p1} {
		if got := get(t, cmd, key); got != l.Owner() {
			t.Errorf("node %d: %s = %q, want the owner %q", i, key, got, l.Owner())
		}
	}
	if err := l.Extend(ctx, 2*ttl); err != nil {
		t.Fatal(err)
	}
	if d := pttl(t, tc, key); d <= ttl {
		t.Errorf("TLS node: PTTL after Extend(%v) = %v, want > %v", 2*ttl, d, ttl)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	absent(t, key, tc, p0, p1)
}

// rediss:// URLs given to NewFromURLs verify the server against the
// system's roots (go-redis ParseURL sets only ServerName): a server whose
// CA is not among them fails the node at once with the certificate error
// in its NodeResult, not a timeout; the other nodes' yes is undone. Made
// trusted through SSL_CERT_FILE (read by Go's crypto/x509 on Unix), the
// same URL works.
func TestTLSURL(t *testing.T) {
	ca := harness.NewCAT(t)
	srv := harness.StartTLS(t, ca)
	plain := harness.Start(t, 2, harness.Config{})
	url := srv.URL()
	if !strings.HasPrefix(url, "rediss://") {
		t.Fatalf("TLS server URL %q", url)
	}
	ctx := context.Background()

	t.Run("untrusted CA", func(t *testing.T) {
		// The CA was made for this test: no system root store has it.
		c, err := redlock.NewFromURLs(append([]string{url}, harness.URLs(plain)...),
			redlock.WithNodeTimeout(nodeTimeout), redlock.WithQuorum(redlock.AllNodes))
		if err != nil {
			t.Fatal(err)
		}
		const key = "lock:tls-untrusted"
		_, err = c.TryLock(ctx, key, ttl)
		var qe *redlock.QuorumError
		if !errors.Is(err, redlock.ErrNotObtained) || !errors.As(err, &qe) {
			t.Fatalf("TryLock with an untrusted server certificate: %v, want a QuorumError matching ErrNotObtained", err)
		}
		r := qe.Nodes[0]
		var unknown x509.UnknownAuthorityError
		if !errors.As(r.Err, &unknown) || r.Timeout() {
			t.Errorf("TLS node: err %v (%T), want x509.UnknownAuthorityError, not a timeout", r.Err, r.Err)
		}
		t.Logf("TLS node error: %v", r.Err)
		_ = c.Close() // waits for the other nodes' calls and their undo
		for _, n := range plain {
			pc := n.Client()
			absent(t, key, pc)
			_ = pc.Close()
		}
	})

	t.Run("trusted through SSL_CERT_FILE", func(t *testing.T) {
		// The system roots are loaded once per process: the check runs
		// in a child process of this test binary.
		cmd := exec.Command(os.Args[0], "-test.run=^TestTLSURLChild$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+ca.CAFile, "SSL_CERT_DIR=", childURLEnv+"="+url)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestTLSURLChild") {
			t.Fatalf("child: %v\n%s", err, out)
		}
	})
}

const childURLEnv = "REDLOCK_TOPOLOGY_TLS_URL"

// TestTLSURLChild runs in the child process of TestTLSURL: NewFromURLs
// with a rediss:// URL whose CA SSL_CERT_FILE names.
func TestTLSURLChild(t *testing.T) {
	url := os.Getenv(childURLEnv)
	if url == "" {
		t.Skip("run by TestTLSURL in a child process")
	}
	c, err := redlock.NewFromURLs([]string{url}, redlock.WithNodeTimeout(nodeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	const key = "lock:tls-url"
	l, err := c.Lock(ctx, key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(opt) // rediss://: verified against SSL_CERT_FILE too
	defer rc.Close()
	if got := get(t, rc, key); got != l.Owner() {
		t.Errorf("%s = %q, want the owner %q", key, got, l.Owner())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	absent(t, key, rc)
}
