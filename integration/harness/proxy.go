package harness

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Fault is what a Proxy does to the traffic it carries.
type Fault int32

const (
	// Pass forwards bytes unchanged (after Latency, if set).
	Pass Fault = iota
	// Blackhole keeps connections open but drops every byte both ways: the
	// client waits for answers that never come.
	Blackhole
	// DropReplies forwards requests to the node but drops its answers: the
	// command may have landed, the client cannot tell (ambiguous reply).
	DropReplies
	// Refuse resets every existing and new connection at once.
	Refuse
)

func (f Fault) String() string {
	return [...]string{"pass", "blackhole", "drop-replies", "refuse"}[f]
}

// Proxy is a TCP fault proxy between one client and one node, listening on
// a free loopback port. Its upstream address is looked up per connection,
// so it follows a node whose address changes on restart (containers).
// It replaces toxiproxy with the three faults the suite needs plus latency.
type Proxy struct {
	Addr     string
	upstream func() string
	ln       net.Listener
	fault    atomic.Int32
	latency  atomic.Int64
	next     atomic.Int64 // delay of the next request chunk only
	cut      atomic.Bool  // drop the next reply and close its connection
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
	closed   atomic.Bool
}

// NewProxy starts a proxy to upstream(). Close stops it.
func NewProxy(upstream func() string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: ln.Addr().String(), upstream: upstream, ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// URL returns the redis:// URL of the proxy.
func (p *Proxy) URL() string { return "redis://" + p.Addr }

// Set changes the fault; Refuse also resets every open connection.
func (p *Proxy) Set(f Fault) {
	p.fault.Store(int32(f))
	if f == Refuse {
		p.resetAll()
	}
}

// SetLatency delays every chunk in both directions by d (0: none).
func (p *Proxy) SetLatency(d time.Duration) { p.latency.Store(int64(d)) }

// DelayNext holds the next chunk a client sends by d; chunks after it, on
// this or any other connection, are not delayed by it. A request sent later
// on another connection can so overtake it: the reordering that a loaded
// proxy (docker-proxy) or network can cause.
func (p *Proxy) DelayNext(d time.Duration) { p.next.Store(int64(d)) }

// CutNextReply drops the node's next reply and closes that connection: the
// command ran, the client sees EOF (and go-redis, unless told not to,
// sends it again on a new connection).
func (p *Proxy) CutNextReply() { p.cut.Store(true) }

// ResetConns resets every open connection once (connection reset after a
// request may have been sent); new connections work.
func (p *Proxy) ResetConns() { p.resetAll() }

// Heal removes every fault and latency.
func (p *Proxy) Heal() { p.fault.Store(int32(Pass)); p.latency.Store(0) }

func (p *Proxy) resetAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
}

func (p *Proxy) track(c net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		if p.closed.Load() {
			return false
		}
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
	return true
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if Fault(p.fault.Load()) == Refuse || !p.track(c, true) {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = c.Close()
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	defer p.track(c, false)
	defer c.Close()
	u, err := net.DialTimeout("tcp", p.upstream(), time.Second)
	if err != nil {
		return
	}
	if !p.track(u, true) {
		_ = u.Close()
		return
	}
	defer p.track(u, false)
	defer u.Close()
	done := make(chan struct{}, 2)
	go func() { p.pipe(u, c, false); done <- struct{}{} }()
	go func() { p.pipe(c, u, true); done <- struct{}{} }()
	<-done
	_ = c.Close()
	_ = u.Close()
	<-done
}

// pipe copies src to dst; reply says src is the node.
func (p *Proxy) pipe(dst, src net.Conn, reply bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if reply && p.cut.CompareAndSwap(true, false) {
				return
			}
			if !reply {
				if d := time.Duration(p.next.Swap(0)); d > 0 {
					time.Sleep(d)
				}
			}
			if d := time.Duration(p.latency.Load()); d > 0 {
				time.Sleep(d)
			}
			switch Fault(p.fault.Load()) {
			case Blackhole:
			case DropReplies:
				if !reply {
					if _, werr := dst.Write(buf[:n]); werr != nil {
						return
					}
				}
			case Refuse:
				return
			default:
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return
			}
			return
		}
	}
}

// Close stops the proxy, closes every connection and waits for its
// goroutines.
func (p *Proxy) Close() {
	if p.closed.Swap(true) {
		return
	}
	_ = p.ln.Close()
	p.resetAll()
	p.wg.Wait()
}
