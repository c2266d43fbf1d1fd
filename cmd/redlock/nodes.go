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

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// localNode is a Redis node this command started itself.
type localNode interface {
	Addr() string
	// Fault stops the node answering (SIGSTOP, or a closed listener for
	// embedded nodes); Heal brings it back with its data.
	Fault() error
	Heal() error
	Close()
}

// embedded reports whether nodes are in-process (miniredis).
func embedded(nodes []localNode) bool {
	for _, n := range nodes {
		if _, ok := n.(*miniNode); ok {
			return true
		}
	}
	return false
}

// startNodes starts n nodes: redis-server processes when the binary is on
// PATH and embedded is false, in-process miniredis otherwise. It returns
// the kind it used.
func startNodes(n int, embedded bool) ([]localNode, string, error) {
	var bin, kind string
	if embedded {
		kind = "embedded in-process nodes (miniredis; --embedded)"
	} else if p, err := exec.LookPath("redis-server"); err == nil {
		bin, kind = p, "redis-server processes ("+p+")"
	} else {
		kind = "embedded in-process nodes (miniredis; no redis-server on PATH)"
	}
	var nodes []localNode
	for i := 0; i < n; i++ {
		var nd localNode
		var err error
		if bin != "" {
			nd, err = startProcess(bin)
		} else {
			nd, err = startMini()
		}
		if err != nil {
			for _, x := range nodes {
				x.Close()
			}
			return nil, "", err
		}
		nodes = append(nodes, nd)
	}
	return nodes, kind, nil
}

func urlsOf(nodes []localNode) []string {
	u := make([]string, len(nodes))
	for i, n := range nodes {
		u[i] = "redis://" + n.Addr()
	}
	return u
}

type procNode struct {
	addr string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func startProcess(bin string) (*procNode, error) {
	dir, err := os.MkdirTemp("", "redlock-node-")
	if err != nil {
		return nil, err
	}
	var last error
	for try := 0; try < 5; try++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"), "--protected-mode", "no")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		p := &procNode{addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir, cmd: cmd, done: make(chan struct{})}
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

func (p *procNode) Addr() string { return p.addr }
func (p *procNode) Fault() error { return p.cmd.Process.Signal(syscall.SIGSTOP) }
func (p *procNode) Heal() error  { return p.cmd.Process.Signal(syscall.SIGCONT) }
func (p *procNode) Close() {
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Kill()
	<-p.done
	_ = os.RemoveAll(p.dir)
}

// miniNode is an in-process node. miniredis does not expire keys by
// itself, so a ticker moves its clock along with real time.
type miniNode struct {
	m    *miniredis.Miniredis
	addr string // kept: m.Addr panics while the node is faulted (closed)
	stop chan struct{}
	done chan struct{}
}

func startMini() (*miniNode, error) {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		return nil, err
	}
	n := &miniNode{m: m, addr: m.Addr(), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(n.done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-n.stop:
				return
			case now := <-t.C:
				m.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	return n, nil
}

func (n *miniNode) Addr() string { return n.addr }
func (n *miniNode) Fault() error { n.m.Close(); return nil }
func (n *miniNode) Heal() error  { return n.m.Restart() }
func (n *miniNode) Close() {
	close(n.stop)
	<-n.done
	n.m.Close()
}
