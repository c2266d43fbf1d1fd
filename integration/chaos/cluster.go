package chaos

import (
	"fmt"

	"github.com/redlock-go/redlock/integration/harness"
)

// Node is one Redis node under test, a process or a container, with the
// faults the nemesis can inject into it.
type Node interface {
	Addr() string   // host:port reachable from this process (changes on container restart)
	Kill() error    // SIGKILL; stays down until Up
	Up() error      // start again after Kill
	Restart() error // kill and start at once (forgets every key without persistence)
	Freeze() error  // SIGSTOP / docker pause
	Thaw() error
	Isolate() error // cut off from every client (docker network disconnect; proxies for processes)
	Rejoin() error
}

// Cluster is the nodes plus one fault proxy per client group and node.
type Cluster struct {
	Nodes   []Node
	Proxies [][]*harness.Proxy // [group][node]
	Counter string             // separate Redis for counters and tokens, never faulted
	Backend string
}

// URLs returns the redis:// URLs through group g's proxies.
func (c *Cluster) URLs(g int) []string {
	u := make([]string, len(c.Nodes))
	for i, p := range c.Proxies[g] {
		u[i] = p.URL()
	}
	return u
}

// NewProxies builds groups×nodes proxies. Close them with CloseProxies.
func (c *Cluster) NewProxies(groups int) error {
	for g := 0; g < groups; g++ {
		var row []*harness.Proxy
		for _, n := range c.Nodes {
			p, err := harness.NewProxy(n.Addr)
			if err != nil {
				return err
			}
			row = append(row, p)
		}
		c.Proxies = append(c.Proxies, row)
	}
	return nil
}

// CloseProxies stops every proxy.
func (c *Cluster) CloseProxies() {
	for _, row := range c.Proxies {
		for _, p := range row {
			p.Close()
		}
	}
}

// HealAll removes every proxy fault, thaws and brings up every node.
func (c *Cluster) HealAll() error {
	for _, row := range c.Proxies {
		for _, p := range row {
			p.Heal()
		}
	}
	var first error
	for i, n := range c.Nodes {
		for _, f := range []func() error{n.Thaw, n.Rejoin} {
			if err := f(); err != nil && first == nil {
				first = fmt.Errorf("heal node %d: %w", i, err)
			}
		}
	}
	return first
}

// procNode adapts a harness process node. Isolate uses the proxies.
type procNode struct {
	n       *harness.Node
	c       *Cluster
	i       int
	down    bool
	isolate bool
}

func (p *procNode) Addr() string { return p.n.Addr }
func (p *procNode) Kill() error  { p.n.Kill(); p.down = true; return nil }
func (p *procNode) Up() error {
	if !p.down {
		return nil
	}
	p.down = false
	return p.n.Up()
}
func (p *procNode) Restart() error { p.down = false; return p.n.Restart() }
func (p *procNode) Freeze() error  { p.n.Freeze(); return nil }
func (p *procNode) Thaw() error    { p.n.Thaw(); return nil }
func (p *procNode) Isolate() error {
	for _, row := range p.c.Proxies {
		row[p.i].Set(harness.Refuse)
	}
	p.isolate = true
	return nil
}
func (p *procNode) Rejoin() error {
	if p.isolate {
		for _, row := range p.c.Proxies {
			row[p.i].Set(harness.Pass)
		}
		p.isolate = false
	}
	return p.Up()
}
