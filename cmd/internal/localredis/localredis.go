// Package localredis starts redis-server processes on free loopback ports,
// without persistence: the nodes of `redlock demo`, of redlock-bench, and
// of their tests. It is a module of its own, under cmd/internal, so that
// both command modules import one copy and nothing outside cmd/ can. It
// needs only the standard library.
package localredis

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Server is a redis-server process started by Start.
type Server struct {
	addr string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartN starts n processes of server bin with the arguments args after
// the defaults (see Start); on an error it stops those it started.
func StartN(bin string, args []string, n int) ([]*Server, error) {
	var servers []*Server
	for i := 0; i < n; i++ {
		s, err := Start(bin, args...)
		if err != nil {
			for _, x := range servers {
				x.Close()
			}
			return nil, err
		}
		servers = append(servers, s)
	}
	return servers, nil
}

// Start starts one process of server bin (redis-server, or a compatible
// server) on a free loopback port, in a temporary directory, with
// persistence off (--save "" --appendonly no) and the arguments args after
// those defaults (a later argument wins). A port taken between choosing
// and binding it is tried again on another (up to 5 times). It returns
// once the process answers INFO on its port.
func Start(bin string, args ...string) (*Server, error) {
	dir, err := os.MkdirTemp("", "redlock-node-")
	if err != nil {
		return nil, err
	}
	var last error
	for try := 0; try < 5; try++ {
		port, err := FreePort()
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		argv := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "no", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"), "--protected-mode", "no"}
		cmd := exec.Command(bin, append(argv, args...)...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		s := &Server{addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir, cmd: cmd, done: make(chan struct{})}
		go func() { _ = cmd.Wait(); close(s.done) }()
		if last = waitReady(s.addr, cmd.Process.Pid, s.done); last == nil {
			return s, nil
		}
		s.stop()
	}
	_ = os.RemoveAll(dir)
	return nil, last
}

// FreePort returns a TCP port free on 127.0.0.1 when it was asked.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady waits until the redis-server process pid answers on addr. A
// server of another process that took the port in the meantime is an
// error (the caller tries another port).
func waitReady(addr string, pid int, done <-chan struct{}) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := serverInfo(addr)
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

// serverInfo sends INFO server to addr and returns the reply, within
// 100 ms to connect and 200 ms for the answer.
func serverInfo(addr string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := io.WriteString(c, "*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n"); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	head = strings.TrimRight(head, "\r\n")
	if !strings.HasPrefix(head, "$") {
		return "", errors.New("INFO: " + head) // e.g. -LOADING
	}
	n, err := strconv.Atoi(head[1:])
	if err != nil || n < 0 {
		return "", fmt.Errorf("INFO: bad reply %q", head)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return "", err
	}
	return string(body), nil
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.addr }

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.addr }

// Fault freezes the server (SIGSTOP); Heal thaws it with its data.
func (s *Server) Fault() error { return s.cmd.Process.Signal(syscall.SIGSTOP) }

// Heal thaws a server frozen by Fault.
func (s *Server) Heal() error { return s.cmd.Process.Signal(syscall.SIGCONT) }

// Close kills the server and removes its directory.
func (s *Server) Close() {
	s.stop()
	_ = os.RemoveAll(s.dir)
}

// stop kills the process and waits for it, keeping its directory.
func (s *Server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Kill()
	<-s.done
}
