package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// node is a redis-server process the bench started on a free loopback
// port, without persistence.
type node struct {
	addr string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// startNodes starts n redis-server processes (the binary from PATH); on an
// error it stops those it started.
func startNodes(n int) ([]*node, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, err
	}
	return startNodesOf(bin, nil, n)
}

// startNodesOf starts n processes of server bin with the arguments extra
// after the defaults (a later argument wins); on an error it stops those
// it started.
func startNodesOf(bin string, extra []string, n int) ([]*node, error) {
	var nodes []*node
	for i := 0; i < n; i++ {
		nd, err := startProcess(bin, extra...)
		if err != nil {
			for _, x := range nodes {
				x.Close()
			}
			return nil, err
		}
		nodes = append(nodes, nd)
	}
	return nodes, nil
}

func urlsOf(nodes []*node) []string {
	u := make([]string, len(nodes))
	for i, n := range nodes {
		u[i] = "redis://" + n.Addr()
	}
	return u
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startProcess starts one redis-server; a port taken between choosing and
// binding it is tried again on another (up to 5 times).
func startProcess(bin string, extra ...string) (*node, error) {
	dir, err := os.MkdirTemp("", "redlock-bench-node-")
	if err != nil {
		return nil, err
	}
	var last error
	for try := 0; try < 5; try++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"), "--protected-mode", "no"}
		cmd := exec.Command(bin, append(args, extra...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		p := &node{addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir, cmd: cmd, done: make(chan struct{})}
		go func() { _ = cmd.Wait(); close(p.done) }()
		if last = waitReady(p.addr, cmd.Process.Pid, p.done); last == nil {
			return p, nil
		}
		p.Close()
	}
	return nil, last
}

// waitReady waits until the redis-server process pid answers on addr. A
// server of another process that took the port in the meantime is an
// error (the caller tries another port).
func waitReady(addr string, pid int, done <-chan struct{}) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		info, err := c.Info(ctx, "server").Result()
		cancel()
		if err == nil {
			if !strings.Contains(info, "process_id:"+strconv.Itoa(pid)+"\r") {
				return fmt.Errorf("another redis-server took port %s", addr)
			}
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("redis-server on %s exited at start", addr)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s not ready: %v", addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Addr is the node's host:port.
func (p *node) Addr() string { return p.addr }

// Fault freezes the node (SIGSTOP); Heal thaws it with its data.
func (p *node) Fault() error { return p.cmd.Process.Signal(syscall.SIGSTOP) }
func (p *node) Heal() error  { return p.cmd.Process.Signal(syscall.SIGCONT) }

// Close kills the node and removes its directory.
func (p *node) Close() {
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Kill()
	<-p.done
	_ = os.RemoveAll(p.dir)
}
