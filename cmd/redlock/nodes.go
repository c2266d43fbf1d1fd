package main

import (
	"os/exec"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/redlock-go/redlock/cmd/internal/localredis"
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
			nd, err = localredis.Start(bin)
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
