// Package rueidisconn is the transport.Conn of a rueidis client, for
// redlock.NewFromConns:
//
//	c1, err := rueidisconn.Open(rueidis.ClientOption{InitAddress: []string{"10.0.0.1:6379"}})
//	...
//	lk, err := redlock.NewFromConns([]transport.Conn{c1, c2, c3})
//
// rueidis pipelines concurrent commands on a shared connection on its own
// (auto-pipelining); the library's coalescing (on by default) still adds
// to it: 1.2x the cycles/s on independent keys, measured with
// BenchmarkIndependent in integration/core.
//
// rueidis keeps a connection whose request timed out and matches the
// replies that follow in order: a proxy between it and the server must
// answer every request it forwards, in order, or close the connection (as
// Redis-aware proxies do); one that drops a reply desynchronizes it.
package rueidisconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/rueidis"

	"github.com/redlock-go/redlock/transport"
)

// Conn is a rueidis client of one server as a transport.Conn. Safe for
// concurrent use.
type Conn struct {
	c      atomic.Pointer[rueidis.Client] // nil until Open's client connected
	addr   string
	owned  bool
	onDial atomic.Pointer[func()]

	opt     rueidis.ClientOption // Open's, for the dial
	mu      sync.Mutex
	dialing chan struct{} // closed when the dial under way ends; nil: none
	err     error         // the last dial's error
	closed  bool
}

// ErrCluster is the error of a cluster client: a Conn reaches one server.
var ErrCluster = errors.New("redlock: rueidisconn: a cluster client reaches several servers; give one client per independent master")

// New wraps c, a client of one server (standalone, or a Sentinel-managed
// master); it stays the caller's. Its new connections are not reported
// (see Open).
func New(c rueidis.Client) (*Conn, error) {
	if c == nil {
		return nil, errors.New("redlock: rueidisconn: nil client")
	}
	if c.Mode() == rueidis.ClientModeCluster {
		return nil, ErrCluster
	}
	cn := &Conn{addr: addrOf(c)}
	cn.c.Store(&c)
	return cn, nil
}

// Open returns a Conn whose client, made from opt, is made on first use
// (rueidis dials when it makes a client: a node down when the lock Client
// starts would otherwise keep it from starting) and made again by the
// calls after a failed dial. Its new connections are reported
// (transport.DialNotifier). Close closes it. opt must name one server.
func Open(opt rueidis.ClientOption) (*Conn, error) {
	if len(opt.InitAddress) != 1 {
		return nil, fmt.Errorf("redlock: rueidisconn: %d addresses; give one client per independent master", len(opt.InitAddress))
	}
	cn := &Conn{owned: true, addr: opt.InitAddress[0]}
	dial := opt.DialCtxFn
	opt.DialCtxFn = func(ctx context.Context, addr string, d *net.Dialer, cfg *tls.Config) (net.Conn, error) {
		var c net.Conn
		var err error
		switch {
		case dial != nil:
			c, err = dial(ctx, addr, d, cfg)
		case cfg != nil:
			c, err = (&tls.Dialer{NetDialer: d, Config: cfg}).DialContext(ctx, "tcp", addr)
		default:
			c, err = d.DialContext(ctx, "tcp", addr)
		}
		if f := cn.onDial.Load(); err == nil && f != nil {
			(*f)()
		}
		return c, err
	}
	cn.opt = opt
	return cn, nil
}

// client returns the client, making it first if need be (one dial at a
// time, waited for within ctx). A failed dial's error says the command
// was not sent.
func (cn *Conn) client(ctx context.Context) (rueidis.Client, error) {
	if c := cn.c.Load(); c != nil {
		return *c, nil
	}
	cn.mu.Lock()
	if cn.closed {
		cn.mu.Unlock()
		return nil, transport.NotSent(rueidis.ErrClosing)
	}
	ch := cn.dialing
	if ch == nil {
		ch = make(chan struct{})
		cn.dialing = ch
		go cn.dial(ch)
	}
	cn.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		return nil, transport.NotSent(ctx.Err())
	}
	if c := cn.c.Load(); c != nil {
		return *c, nil
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return nil, transport.NotSent(cn.err)
}

func (cn *Conn) dial(done chan struct{}) {
	c, err := rueidis.NewClient(cn.opt)
	if err == nil && c.Mode() == rueidis.ClientModeCluster {
		c.Close()
		c, err = nil, ErrCluster
	}
	cn.mu.Lock()
	defer cn.mu.Unlock()
	switch {
	case err != nil:
		cn.err = err
	case cn.closed:
		c.Close()
		cn.err = rueidis.ErrClosing
	default:
		cn.c.Store(&c)
	}
	cn.dialing = nil
	close(done)
}

// Client returns the wrapped client, nil if Open's has not connected yet.
func (cn *Conn) Client() rueidis.Client {
	if c := cn.c.Load(); c != nil {
		return *c
	}
	return nil
}

// Close closes the client if Open made it.
func (cn *Conn) Close() {
	if !cn.owned {
		return
	}
	cn.mu.Lock()
	cn.closed = true
	cn.mu.Unlock()
	if c := cn.c.Load(); c != nil {
		(*c).Close()
	}
}

func addrOf(c rueidis.Client) string {
	var a []string
	for k := range c.Nodes() {
		a = append(a, k)
	}
	sort.Strings(a)
	return strings.Join(a, ",")
}

// Addr implements transport.Conn.
func (cn *Conn) Addr() string { return cn.addr }

// HonorsDeadlines implements transport.DeadlineHonorer: rueidis returns
// by ctx's deadline.
func (cn *Conn) HonorsDeadlines() bool { return true }

// MayRetry implements transport.Retrier: rueidis retries read-only
// commands only, and a command built from raw arguments is not one.
func (cn *Conn) MayRetry() bool { return false }

// OnDial implements transport.DialNotifier for a Conn made by Open (New's
// client dials unseen).
func (cn *Conn) OnDial(f func()) {
	if cn.owned {
		cn.onDial.Store(&f)
	}
}

// Do implements transport.Conn.
func (cn *Conn) Do(ctx context.Context, args ...any) (any, error) {
	c, err := cn.client(ctx)
	if err != nil {
		return nil, err
	}
	return result(c.Do(ctx, build(c, args)))
}

// Pipeline implements transport.Conn: rueidis's DoMulti writes the
// commands in order on one connection.
func (cn *Conn) Pipeline(ctx context.Context, cmds [][]any, replies []transport.Reply) {
	c, err := cn.client(ctx)
	if err != nil {
		for i := range replies {
			replies[i] = transport.Reply{Err: err}
		}
		return
	}
	multi := make(rueidis.Commands, len(cmds))
	for i, args := range cmds {
		multi[i] = build(c, args)
	}
	for i, r := range c.DoMulti(ctx, multi...) {
		replies[i].Val, replies[i].Err = result(r)
	}
}

func build(c rueidis.Client, args []any) rueidis.Completed {
	return c.B().Arbitrary(strs(args)...).Build()
}

// strs formats the arguments as Redis takes them.
func strs(args []any) []string {
	s := make([]string, len(args))
	for i, a := range args {
		switch x := a.(type) {
		case string:
			s[i] = x
		case []byte:
			s[i] = string(x)
		case int:
			s[i] = strconv.Itoa(x)
		case int64:
			s[i] = strconv.FormatInt(x, 10)
		case float64:
			s[i] = strconv.FormatFloat(x, 'f', -1, 64)
		default:
			s[i] = fmt.Sprint(x)
		}
	}
	return s
}

// result reads one reply: a nil reply is (nil, nil), an error reply a
// transport.ErrorReply.
func result(r rueidis.RedisResult) (any, error) {
	if err := r.Error(); err != nil {
		return nil, classify(err)
	}
	v, err := r.ToAny()
	if err != nil {
		return nil, classify(err)
	}
	return v, nil
}

// classify turns a nil reply into no error and an error reply into a
// transport.ErrorReply with its text as the server sent it: the client
// strips a leading "ERR ", which comes back (the code of every other
// error reply is an upper-case word, which it keeps).
func classify(err error) error {
	re, ok := err.(*rueidis.RedisError)
	switch {
	case !ok:
		return err
	case re.IsNil():
		return nil
	}
	msg := re.Error()
	if code, _, _ := strings.Cut(msg, " "); code == "" || strings.ToUpper(code) != code {
		msg = "ERR " + msg
	}
	return transport.ErrorReply(msg)
}
