// Package harness starts real redis-server processes on free loopback ports
// for integration tests, and injects process-level faults into them
// (SIGKILL, SIGSTOP/SIGCONT, restart with or without persistence).
package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ServerPath returns the redis-server binary: $REDIS_SERVER, or the one on
// PATH, or an error that says how to install it.
func ServerPath() (string, error) {
	if p := os.Getenv("REDIS_SERVER"); p != "" {
		return p, nil
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", errors.New("harness: redis-server not found on PATH (install it: apt-get install -y redis-server, or set REDIS_SERVER)")
	}
	return p, nil
}

// Config of one node process.
type Config struct {
	// Persist turns on appendonly with appendfsync always, so a restarted
	// node remembers its locks. Off: no persistence at all.
	Persist bool
	// Alias: the node also listens on 127.0.0.2, a second address of the
	// same server (a DNS alias, a second URL for one host).
	Alias bool
	// Fsync is appendfsync under Persist: "always" (the default when
	// empty), "everysec" or "no".
	Fsync string
	// Bin is the server executable; empty: ServerPath's.
	Bin string
	// Args are more server arguments ("--hz", "100").
	Args []string
}

// Node is one redis-server process. Methods are safe for concurrent use.
type Node struct {
	Addr string
	Port int

	cfg  Config
	bin  string
	dir  string
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts n nodes and stops them when the test ends. It fails the test
// if redis-server is missing or does not come up.
func Start(t testing.TB, n int, cfg Config) []*Node {
	t.Helper()
	nodes := make([]*Node, n)
	for i := range nodes {
		nd, err := StartNode(t.TempDir(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nd.Stop)
		nodes[i] = nd
	}
	return nodes
}

// StartNode starts one node with its data in dir. The caller must Stop it.
func StartNode(dir string, cfg Config) (*Node, error) {
	bin := cfg.Bin
	if bin == "" {
		var err error
		if bin, err = ServerPath(); err != nil {
			return nil, err
		}
	}
	var lastErr error
	for try := 0; try < 5; try++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		n := &Node{Addr: "127.0.0.1:" + strconv.Itoa(port), Port: port, cfg: cfg, bin: bin, dir: dir}
		if lastErr = n.start(); lastErr == nil {
			return n, nil
		}
	}
	return nil, lastErr
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (n *Node) args() []string {
	a := []string{
		"--port", strconv.Itoa(n.Port), "--bind", "127.0.0.1",
		"--dir", n.dir, "--save", "", "--daemonize", "no",
		"--logfile", filepath.Join(n.dir, "redis.log"),
		"--protected-mode", "no",
	}
	if n.cfg.Alias {
		a[3] = "127.0.0.1 127.0.0.2"
	}
	if n.cfg.Persist {
		fsync := n.cfg.Fsync
		if fsync == "" {
			fsync = "always"
		}
		a = append(a, "--appendonly", "yes", "--appendfsync", fsync)
	} else {
		a = append(a, "--appendonly", "no")
	}
	return append(a, n.cfg.Args...)
}

func (n *Node) start() error {
	cmd := exec.Command(n.bin, n.args()...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("harness: start redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
	c := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := c.Ping(ctx).Err()
		if err == nil {
			// The port was free when chosen, but another process (a test
			// binary running in parallel) may have bound it since: then
			// that server answers, and ours exits. Make sure it is ours.
			err = ownServer(ctx, c, cmd.Process.Pid)
			if errors.Is(err, errNotOurs) {
				cancel()
				n.Kill()
				return fmt.Errorf("harness: port of %s: %w", n.Addr, err)
			}
		}
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(n.dir, "redis.log"))
			return fmt.Errorf("harness: redis-server on %s exited: %s", n.Addr, tail(log))
		default:
		}
		if time.Now().After(deadline) {
			n.Kill()
			return fmt.Errorf("harness: redis-server on %s not ready: %v", n.Addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var errNotOurs = errors.New("another redis-server answers there")

// ownServer checks that the server c reaches is the process pid.
func ownServer(ctx context.Context, c *redis.Client, pid int) error {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			if v != strconv.Itoa(pid) {
				return fmt.Errorf("%w (pid %s, ours %d)", errNotOurs, v, pid)
			}
			return nil
		}
	}
	return errors.New("INFO server has no process_id")
}

func tail(b []byte) string {
	if len(b) > 500 {
		b = b[len(b)-500:]
	}
	return string(b)
}

func (n *Node) signal(s syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && n.cmd.Process != nil {
		_ = n.cmd.Process.Signal(s)
	}
}

// Freeze stops the process with SIGSTOP: connections stay open and
// commands hang, as with a GC pause or a hung host.
func (n *Node) Freeze() { n.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen process.
func (n *Node) Thaw() { n.signal(syscall.SIGCONT) }

// Kill sends SIGKILL and waits for the process to exit.
func (n *Node) Kill() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Kill()
	<-done
}

// Restart kills the node and starts it again on the same port and data
// directory. Without Persist the restarted node has forgotten every key.
func (n *Node) Restart() error {
	n.Kill()
	return n.start()
}

// Stop kills the node (idempotent).
func (n *Node) Stop() { n.Kill() }

// Client returns a go-redis client for the node with ctx deadlines enabled.
// The caller closes it.
func (n *Node) Client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: n.Addr, ContextTimeoutEnabled: true})
}

// URL returns the node's redis:// URL.
func (n *Node) URL() string { return "redis://" + n.Addr }

// URLs returns the URLs of nodes.
func URLs(nodes []*Node) []string {
	u := make([]string, len(nodes))
	for i, n := range nodes {
		u[i] = n.URL()
	}
	return u
}
