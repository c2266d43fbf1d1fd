package main

import (
	"io"
	"net"
	"sync"
	"time"
)

// delayProxy forwards TCP to target and holds every reply chunk for delay:
// a node that answers delay later than the others.
type delayProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	delay  time.Duration
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newDelayProxy(target string) (*delayProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &delayProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *delayProxy) Addr() string { return p.ln.Addr().String() }

func (p *delayProxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

func (p *delayProxy) getDelay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.delay
}

func (p *delayProxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	if add {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
	p.mu.Unlock()
}

func (p *delayProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.track(c, true)
		p.track(s, true)
		p.wg.Add(2)
		go func() { // client -> server, undelayed
			defer p.wg.Done()
			_, _ = io.Copy(s, c)
			s.Close()
			c.Close()
			p.track(c, false)
		}()
		go func() { // server -> client, delayed
			defer p.wg.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := s.Read(buf)
				if n > 0 {
					if d := p.getDelay(); d > 0 {
						time.Sleep(d)
					}
					if _, werr := c.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break
				}
			}
			c.Close()
			s.Close()
			p.track(s, false)
		}()
	}
}

func (p *delayProxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
