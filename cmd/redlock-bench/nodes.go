package main

import (
	"os/exec"

	"github.com/redlock-go/redlock/cmd/internal/localredis"
)

// node is a redis-server process the bench started on a free loopback
// port, without persistence (package localredis).
type node = localredis.Server

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
	return localredis.StartN(bin, extra, n)
}

func urlsOf(nodes []*node) []string {
	u := make([]string, len(nodes))
	for i, n := range nodes {
		u[i] = n.URL()
	}
	return u
}
