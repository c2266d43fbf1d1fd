package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server process started with arguments of the caller's
// choosing: cluster nodes, sentinels, TLS nodes (Node covers plain ones).
// Methods are safe for concurrent use.
type Server struct {
	Addr  string // 127.0.0.1:Port
	Port  int    // the port clients connect to (the TLS port of a TLS server)
	Ports []int  // every port it was given: Ports[0] == Port, then extra ones (a cluster bus)
	Dir   string // data directory, log file redis.log

	opts redis.Options // how to reach it (TLS settings)
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// serverSpec says how to start a Server.
type serverSpec struct {
	ports int // free loopback ports to pick (the first is the client port)
	// args returns redis-server's arguments for the picked ports; it may
	// write files (a sentinel config) into dir.
	args func(dir string, ports []int) ([]string, error)
	// opts returns the client options for the readiness check and Client
	// (TLS settings); nil: plain TCP.
	opts func(addr string) *redis.Options
}

// readyTimeout bounds the wait for a server (or a cluster, or a sentinel)
// to come up: generous, the machine may be loaded.
const readyTimeout = 20 * time.Second

// startServer starts a server from spec with its data in dir, retrying on
// another port if one was taken in the meantime. The caller must Stop it.
func startServer(dir string, spec serverSpec) (*Server, error) {
	bin, err := ServerPath()
	if err != nil {
		return nil, err
	}
	var lastErr error
	for try := 0; try < 5; try++ {
		ports := make([]int, spec.ports)
		for i := range ports {
			if ports[i], err = freePort(); err != nil {
				return nil, err
			}
		}
		args, err := spec.args(dir, ports)
		if err != nil {
			return nil, err
		}
		s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(ports[0]), Port: ports[0], Ports: ports, Dir: dir}
		s.opts = redis.Options{Addr: s.Addr}
		if spec.opts != nil {
			s.opts = *spec.opts(s.Addr)
		}
		if lastErr = s.start(bin, args); lastErr == nil {
			return s, nil
		}
	}
	return nil, lastErr
}

// baseArgs are the arguments every Server gets: loopback only, no
// persistence, log in dir.
func baseArgs(dir string) []string {
	return []string{
		"--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no",
		"--daemonize", "no", "--logfile", filepath.Join(dir, "redis.log"),
		"--protected-mode", "no",
	}
}

func (s *Server) start(bin string, args []string) error {
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("harness: start redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	o := s.opts
	o.MaxRetries, o.DialTimeout = -1, time.Second
	c := redis.NewClient(&o)
	defer c.Close()
	deadline := time.Now().Add(readyTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		if err == nil {
			// Another process may have bound the port since it was
			// picked: make sure the server that answers is ours.
			err = ownServer(ctx, c, cmd.Process.Pid)
			if errors.Is(err, errNotOurs) {
				cancel()
				s.Kill()
				return fmt.Errorf("harness: port of %s: %w", s.Addr, err)
			}
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(s.Dir, "redis.log"))
			return fmt.Errorf("harness: redis-server on %s exited: %s", s.Addr, tail(log))
		default:
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("harness: redis-server on %s not ready: %v", s.Addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Options returns a copy of the client options that reach the server
// (address and TLS settings).
func (s *Server) Options() *redis.Options {
	o := s.opts
	return &o
}

// Client returns a go-redis client for the server with ctx deadlines
// enabled. The caller closes it.
func (s *Server) Client() *redis.Client {
	o := s.Options()
	o.ContextTimeoutEnabled = true
	return redis.NewClient(o)
}

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}

// Freeze stops the process with SIGSTOP.
func (s *Server) Freeze() { s.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen process.
func (s *Server) Thaw() { s.signal(syscall.SIGCONT) }

// Kill sends SIGKILL and waits for the process to exit (idempotent).
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Kill()
	<-done
}

// Stop kills the server (idempotent).
func (s *Server) Stop() { s.Kill() }

// startServerT is startServer for a test: it fails the test if the server
// does not come up and stops it when the test ends.
func startServerT(t testing.TB, spec serverSpec) *Server {
	t.Helper()
	s, err := startServer(t.TempDir(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// waitFor polls check until it returns nil or readyTimeout has passed,
// then returns its last error.
func waitFor(what string, check func(ctx context.Context) error) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := check(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("harness: %s not ready after %v: %w", what, readyTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
