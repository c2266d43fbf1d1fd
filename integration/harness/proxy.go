package harness

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
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
	keep     bool // keep client connections across upstream losses (NewKeepingProxy)
	inject   atomic.Pointer[injection]
}

// injection is a one-shot error reply (see InjectError).
type injection struct{ match, reply string }

// InjectError answers the next request chunk that contains match with the
// error reply msg (e.g. "OOM command not allowed ...") instead of sending
// it to the node: the node never sees that command. Once only.
func (p *Proxy) InjectError(match, msg string) {
	p.inject.Store(&injection{match: match, reply: "-" + msg + "\r\n"})
}

// Injecting reports whether an InjectError still waits for its request.
func (p *Proxy) Injecting() bool { return p.inject.Load() != nil }

// injected reports whether req is the chunk an InjectError waits for, and
// if so answers it on client.
func (p *Proxy) injected(req []byte, client net.Conn) bool {
	in := p.inject.Load()
	if in == nil || !bytes.Contains(req, []byte(in.match)) || commands(req) != 1 || !p.inject.CompareAndSwap(in, nil) {
		return false
	}
	_, _ = client.Write([]byte(in.reply))
	return true
}

// commands returns how many whole commands (RESP arrays of bulk strings)
// chunk holds, -1 if it holds anything else. One error reply stands for
// one command only: a client that pipelines (rueidis) would match the
// replies that follow to the wrong requests.
func commands(chunk []byte) int {
	n := 0
	for len(chunk) > 0 {
		args, rest, ok := respInt(chunk, '*')
		if !ok {
			return -1
		}
		for ; args > 0; args-- {
			size, after, ok := respInt(rest, '$')
			if !ok || size < 0 || len(after) < size+2 {
				return -1
			}
			rest = after[size+2:]
		}
		chunk, n = rest, n+1
	}
	return n
}

// respInt reads a RESP header line "<kind><int>\r\n" from b.
func respInt(b []byte, kind byte) (int, []byte, bool) {
	end := bytes.Index(b, []byte("\r\n"))
	if len(b) == 0 || b[0] != kind || end < 2 {
		return 0, nil, false
	}
	v, err := strconv.Atoi(string(b[1:end]))
	return v, b[end+2:], err == nil
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

// NewKeepingProxy starts a proxy to upstream() that keeps each client's
// connection when the node behind it goes away: the next request is sent
// on a new upstream connection (redialed until the node is back, for up to
// 10 s), as Redis-aware proxies and sidecars do. A request in flight when
// the node went away gets no reply. The client never sees a new connection,
// so it cannot tell from connection events that the node restarted. Faults
// and latency apply to replies only.
func NewKeepingProxy(upstream func() string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: ln.Addr().String(), upstream: upstream, ln: ln, conns: map[net.Conn]struct{}{}, keep: true}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// URL returns the redis:// URL of the proxy.
func (p *Proxy) URL() string { return "redis://" + p.Addr }

// Set changes the fault; Refuse also resets every open connection, and so
// does leaving Blackhole or DropReplies (see lossy).
func (p *Proxy) Set(f Fault) {
	old := Fault(p.fault.Swap(int32(f)))
	if f == Refuse || old != f && lossy(old) {
		p.resetAll()
	}
}

// lossy reports whether f drops bytes of connections it keeps open. A TCP
// connection never goes on with bytes missing (it retransmits them, or is
// reset), and a client that pipelines on one connection (rueidis) would
// match the replies that follow to the wrong requests: so the connections
// that lost bytes are reset when the fault ends.
func lossy(f Fault) bool { return f == Blackhole || f == DropReplies }

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

// Heal removes every fault and latency (resetting the connections of a
// lossy fault, as Set does).
func (p *Proxy) Heal() {
	p.latency.Store(0)
	p.Set(Pass)
}

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
		if p.keep {
			go p.serveKept(c)
		} else {
			go p.serve(c)
		}
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
	go func() { p.pipe(u, c, false); done <- struct{}{} }() // requests (InjectError answers on c)
	go func() { p.pipe(c, u, true); done <- struct{}{} }()
	<-done
	_ = c.Close()
	_ = u.Close()
	<-done
}

// serveKept serves client c for a keeping proxy: requests go to the
// current upstream connection, dialed on demand; each upstream connection's
// replies are piped back to c until it ends.
func (p *Proxy) serveKept(c net.Conn) {
	defer p.wg.Done()
	defer p.track(c, false)
	defer c.Close()
	var mu sync.Mutex
	var u net.Conn
	var replies sync.WaitGroup
	drop := func(w net.Conn) {
		mu.Lock()
		if u == w {
			u = nil
		}
		mu.Unlock()
		p.track(w, false)
		_ = w.Close()
	}
	var hello []byte // the connection's handshake, sent again to a new upstream
	dialed := false
	upstream := func() (net.Conn, error) {
		mu.Lock()
		defer mu.Unlock()
		for tries := 0; u == nil; tries++ {
			nu, err := net.DialTimeout("tcp", p.upstream(), time.Second)
			if err == nil && dialed && hello != nil {
				err = handshake(nu, hello)
			}
			switch {
			case err == nil && p.track(nu, true):
				u, dialed = nu, true
				replies.Add(1)
				go func() { defer replies.Done(); p.pipe(c, nu, true); drop(nu) }()
			case err == nil:
				_ = nu.Close()
				return nil, net.ErrClosed
			case p.closed.Load() || tries >= 500:
				return nil, err
			default:
				time.Sleep(20 * time.Millisecond)
			}
		}
		return u, nil
	}
	defer replies.Wait()
	defer func() {
		mu.Lock()
		w := u
		mu.Unlock()
		if w != nil {
			drop(w)
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 && p.injected(buf[:n], c) {
			n = 0
		}
		if n > 0 && !dialed && isHandshake(buf[:n]) {
			hello = append([]byte(nil), buf[:n]...)
		}
		for n > 0 {
			w, uerr := upstream()
			if uerr != nil {
				return
			}
			if _, werr := w.Write(buf[:n]); werr == nil {
				break
			}
			drop(w)
		}
		if err != nil {
			return
		}
	}
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
				if p.injected(buf[:n], src) {
					continue
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

// isHandshake reports whether chunk, a connection's first, is its
// handshake: whole commands, the first HELLO or AUTH.
func isHandshake(chunk []byte) bool {
	if commands(chunk) < 1 {
		return false
	}
	_, rest, _ := respInt(chunk, '*')
	size, after, _ := respInt(rest, '$')
	verb := strings.ToUpper(string(after[:size]))
	return verb == "HELLO" || verb == "AUTH"
}

// handshake sends a client connection's handshake to its new upstream
// connection w and reads the replies, as a Redis-aware proxy does when it
// redials: the server behind the kept connection then speaks the protocol
// version and runs as the user the client chose. The client never sees
// those replies.
func handshake(w net.Conn, hello []byte) error {
	_ = w.SetDeadline(time.Now().Add(time.Second))
	defer w.SetDeadline(time.Time{})
	if _, err := w.Write(hello); err != nil {
		_ = w.Close()
		return err
	}
	r := bufio.NewReader(w)
	for i := commands(hello); i > 0; i-- {
		if err := skipReply(r); err != nil {
			_ = w.Close()
			return err
		}
	}
	if r.Buffered() > 0 {
		_ = w.Close()
		return errors.New("harness: proxy: more than the handshake's replies")
	}
	return nil
}

// skipReply reads one RESP2 or RESP3 reply from r.
func skipReply(r *bufio.Reader) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if len(line) < 3 {
		return fmt.Errorf("harness: proxy: bad reply line %q", line)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
	switch line[0] {
	case '$', '=', '!':
		if n >= 0 {
			_, err = io.CopyN(io.Discard, r, int64(n)+2)
		}
		return err
	case '*', '~', '>':
	case '%':
		n *= 2
	case '|':
		n = 2*n + 1 // the attributes, then the reply they describe
	default:
		return nil
	}
	for ; n > 0; n-- {
		if err := skipReply(r); err != nil {
			return err
		}
	}
	return nil
}
