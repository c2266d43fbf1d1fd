// Package redlock is a distributed lock across N independent Redis masters
// (the Redlock algorithm; MultiLock when all N are required).
//
// A lock returned by Lock (or TryLock) is held on a quorum of the nodes
// (by default N/2+1) under an owner value no other attempt has, and no
// other client can hold the same key on a quorum before its Deadline, taken
// on this process's monotonic clock less a drift budget. Its Done channel closes as soon as
// that may no longer be true. The promise rests on assumptions about the
// nodes, their clocks and pauses of this process: SAFETY.md in the
// repository states the full guarantee and goes through the faults one by
// one, each with the test that shows it.
//
// The basic path: one Client for the process, then Lock, act while the lock
// is held, Release.
//
//	c, err := redlock.New(clients) // one go-redis client per independent master (or NewFromURLs)
//	if err != nil {
//		return err // bad input (ErrInvalidArgument): nothing was sent
//	}
//	defer c.Close()
//	l, err := c.Lock(ctx, "stock:sku-42", 10*time.Second) // waits until acquired or ctx is done
//	if err != nil {
//		return err // ErrNotObtained; a *QuorumError holds every node's answer
//	}
//	defer l.Release(context.Background())
//	// l.Done() closes, and l.Context() ends, at Release, at a loss or at
//	// l.Deadline(): the work must stop touching the resource then.
//	return deductStock(l.Context())
//
// TryLock makes one attempt; Run holds a lock renewed in the background
// (watchdog mode) while a function runs; WithFencing gives each holder a
// token the resource can check (package fence). Logs, metrics and traces
// come from WithLogger, WithObserver, WithNodeObserver and Client.Stats,
// whose types are in package observe (the redlockotel module turns them
// into OpenTelemetry metrics and spans).
//
// # Guarantee
//
// The deadline is computed on the client's monotonic clock as
//
//	start of the successful attempt + TTL - (TTL*driftFactor + 2ms)
//
// and a lock whose validity is not positive is never returned; the owner
// value is the Client's instance id (Client.ID) and 128 random bits.
//
// It assumes that the nodes do not lose keys, or that a node that lost them
// stays out of the quorum long enough: restarts this Client observes, and
// nodes started after it, are quarantined by default (WithRestartQuarantine);
// a node first met after it restarted empty is covered only by strict mode
// (QuarantineFresh) or appendonly with appendfsync always. It assumes node
// clocks run at rates within driftFactor of the client's (WithDrift
// watches them), and that the client does not pause past the deadline
// between checking Remaining and acting on the resource: only a fencing
// token checked by the resource closes that gap (WithFencing, package
// fence). SAFETY.md goes through the faults one by one.
//
// # How calls run
//
// A Client is built once from the nodes' go-redis clients or URLs and is
// safe for concurrent use. Lock blocks, retrying with jittered exponential
// backoff until acquired or ctx is done; TryLock makes one attempt. Every
// call sends to all nodes in parallel and returns as soon as the quorum is
// reached or can no longer be reached, so a slow or dead minority does not
// slow it down; a node whose last call timed out gets one call at a time
// until it answers in time again, while the others can make the quorum.
//
// A lock taken with the Watchdog TTL is renewed in the background until
// Release; every Lock's Done, Context and Err say at once when it is lost.
//
// Each attempt stores its own random owner value. A failed attempt is
// released on every node that may hold it (it said yes, or its call failed
// with an unknown outcome), each node only after it answered that attempt's
// command, so the release cannot overtake it; a node that refused is left
// alone. The node calls are not cut short when ctx ends (they run to their
// answer or the node timeout, in the background), so their outcome stays
// known and the clean-up exact; Lock itself returns at once.
package redlock

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/deadline"
	"github.com/redlock-go/redlock/internal/goredisconn"
	"github.com/redlock-go/redlock/internal/handoff"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/internal/nodeurl"
	"github.com/redlock-go/redlock/internal/quorum"
	"github.com/redlock-go/redlock/observe"
	"github.com/redlock-go/redlock/transport"
)

// Client locks keys across a fixed set of nodes. It is safe for concurrent
// use.
type Client struct {
	nodes   []*node.Node
	health  []nodeHealth            // per node, see nodeHealth
	owned   []redis.UniversalClient // clients made by NewFromURLs
	need    int
	cluster bool
	retries bool // some node's client may send a command twice
	o       options
	id      string       // this Client's instance id, the prefix of every owner value
	prefix  string       // id + ":"
	rel     releases     // release calls in flight, which acquisitions of the same key wait for
	renewer renewer      // watchdog renewals due, sent in batches
	events  events       // events of background work, reported in order (reportLater)
	hub     *handoff.Hub // local queues of Lock's waiters, woken by release notifications
	fair    fairQueues   // this Client's fair waiters, per key
	rivals  rivals       // per key, how this Client's waiters give way to other processes'
	foreign foreignState // owner values found that this library did not write (foreign.go)
	gates   []gate       // what may discount a node's vote (see gate.go); fixed by New
	// countsFn is quorum.Config.Counts over gates; nil when there are none.
	countsFn func(int) bool
	q        *quarantine      // restart quarantine and alias gate; nil when off
	around   callGate         // the gate that runs around lock commands (the quarantine's); nil when none
	ids      identities       // dial counts and learned identities, for q
	dm       *driftMon        // clock-drift monitor (and gate); nil when off
	ops      inflight         // Lock, Extend and Release calls in progress; Close waits for them
	wg       inflight         // node calls still in flight (stragglers)
	ends     *deadline.Shared // the node calls' deadlines, shared by rounds ending together
	workers  quorum.Workers   // the goroutines that make node calls, parked between them
	now      func() time.Time // c.o.clock.Now as a func value, made once: rounds take it
	closed   atomic.Bool
	// closing is cancelled by Close; it ends the backoff waits of Lock.
	closing context.Context
	stop    context.CancelFunc
}

// New returns a Client over the given nodes, one go-redis client per
// independent Redis master (standalone, sentinel-failover, or cluster).
// The clients stay the caller's: Close does not close them.
//
// For a per-node deadline that reaches the socket, create the clients with
// ContextTimeoutEnabled: true. Otherwise go-redis ignores context deadlines;
// the Client then still returns on time, but the abandoned command holds a
// connection until the client's own ReadTimeout.
//
// go-redis sends a command again after a network error unless MaxRetries
// is -1. The lock stays exact either way: on such clients it acquires with
// a script that says yes where our value already is (a SET NX that ran,
// lost its answer and was sent again would say no and leave our key
// behind), at a little more work for the node than SET NX.
//
// Unless the restart quarantine is off (WithRestartQuarantine), New adds a
// go-redis hook to each client (a DialHook that counts new connections, so
// that the node's identity is read again after a possible restart; commands
// pass through untouched). It stays on the client after Close.
//
// Every node must be a different server: two clients that name the same
// host and port (any database; localhost, 127.0.0.1 and ::1 are one host)
// would let one server cast two votes. New returns an error matching
// ErrInvalidArgument, naming the node, for no nodes or more than 64, a nil
// client (also a typed nil such as (*redis.Client)(nil)), two clients of one
// server, a cluster or ring client with WithDurableVotes, or an invalid
// option. It sends nothing to the nodes (the drift monitor, if on, sends
// its first TIME one interval later).
func New(clients []redis.UniversalClient, opts ...Option) (*Client, error) {
	return newClient(clients, nil, opts)
}

// NewFromURLs connects to one node per URL (redis://, rediss:// or unix://,
// as go-redis ParseURL accepts, with password, database and TLS) with
// context deadlines enabled, go-redis's retries off (unless the URL sets
// max_retries: a failed node call then counts as an unknown outcome and is
// undone) and one dial per attempt (newer go-redis versions otherwise dial
// a refusing node five times, 100ms apart, so a dead node would cost every
// round its node deadline), speaking RESP2 unless the URL sets protocol=
// (the replies a lock needs are the same, and go-redis then skips a socket
// read before every command). Close closes these connections.
//
// A URL without a host (redis://, redis:///0), with a port outside 1-65535
// or that go-redis cannot parse is refused with ErrInvalidArgument naming
// the node and the URL, its password masked; so are two URLs of one server
// (see New). Nothing is sent before the first lock.
func NewFromURLs(urls []string, opts ...Option) (*Client, error) {
	if len(urls) == 0 {
		return nil, invalid("no nodes")
	}
	parsed := make([]*redis.Options, len(urls))
	for i, u := range urls { // all checked before any client is made
		opt, err := nodeurl.Parse(u)
		if err != nil {
			return nil, invalid("node %d: %v", i, err)
		}
		opt.ContextTimeoutEnabled = true
		if !strings.Contains(u, "max_retries=") {
			opt.MaxRetries = -1 // a failed call counts as unknown and is undone; see New
		}
		if !strings.Contains(u, "protocol=") {
			// RESP2: the lock's replies are the same, and go-redis then
			// skips its check for pending push notifications (RESP3 only),
			// a socket read before every command.
			opt.Protocol = 2
		}
		dialOnce(opt) // a dead node fails at once, not after five dials 100ms apart
		if opt.TLSConfig != nil && opt.Dialer == nil {
			opt.Dialer = tlsDialer(opt)
		}
		parsed[i] = opt
	}
	clients := make([]redis.UniversalClient, len(parsed))
	for i, opt := range parsed {
		clients[i] = redis.NewClient(opt)
	}
	c, err := newClient(clients, clients, opts)
	if err != nil {
		for _, cl := range clients {
			_ = cl.Close()
		}
		return nil, err
	}
	return c, nil
}

// NewFromConns returns a Client over the given transports, one per
// independent Redis master (standalone or Sentinel failover): a go-redis,
// rueidis or valkey-go client through its adapter (modules rueidisconn
// and valkeyconn), or any other transport.Conn. The transports stay the
// caller's: Close does not close them. Each must reach one server; its
// Addr names it for the check that no server casts two votes. A
// transport that does not report that it honors ctx deadlines and sends
// no command twice (transport.DeadlineHonorer, transport.Retrier) is
// assumed to do neither, as go-redis's defaults do (see New).
//
// New returns an error matching ErrInvalidArgument for no nodes or more
// than 64, a nil transport, two transports of one server, or an invalid
// option. It sends nothing to the nodes.
func NewFromConns(conns []transport.Conn, opts ...Option) (*Client, error) {
	specs := make([]nodeSpec, len(conns))
	for i, cn := range conns {
		if cn == nil {
			specs[i].bad = invalid("node %d: nil transport", i)
			continue
		}
		specs[i] = nodeSpec{conn: cn, servers: node.ConnServers(cn.Addr()), pubsub: true,
			mk: func(t node.Tracker) *node.Node { return node.NewConn(cn, t) }}
	}
	return build(specs, nil, opts)
}

// nodeSpec is one node as New or NewFromConns was given it.
type nodeSpec struct {
	conn    transport.Conn
	mk      func(node.Tracker) *node.Node
	servers []string // see node.Servers
	multi   string   // a go-redis cluster or ring client's type: no durable votes
	cluster bool
	pubsub  bool  // waiters subscribe on it (see package handoff)
	bad     error // a nil client
}

func newClient(clients, owned []redis.UniversalClient, opts []Option) (*Client, error) {
	specs := make([]nodeSpec, len(clients))
	for i, cl := range clients {
		if isNil(cl) {
			specs[i].bad = invalid("node %d: nil client %T", i, cl)
			continue
		}
		gc := goredisconn.New(cl)
		specs[i] = nodeSpec{conn: gc, servers: node.Servers(cl), cluster: gc.Cluster(), pubsub: gc.Plain(),
			mk: func(t node.Tracker) *node.Node { return node.New(cl, t) }}
		switch cl.(type) {
		case *redis.ClusterClient, *redis.Ring:
			specs[i].multi = fmt.Sprintf("%T", cl)
		}
	}
	return build(specs, owned, opts)
}

func build(specs []nodeSpec, owned []redis.UniversalClient, opts []Option) (*Client, error) {
	o := defaults()
	for _, opt := range opts {
		if opt == nil {
			return nil, invalid("nil option")
		}
		opt.apply(&o)
	}
	if len(specs) == 0 {
		return nil, invalid("no nodes")
	}
	if len(specs) > maxNodes {
		return nil, invalid("%d nodes; at most %d are supported", len(specs), maxNodes)
	}
	if err := o.validate(len(specs)); err != nil {
		return nil, err
	}
	c := &Client{owned: owned, need: o.quorum.need(len(specs)), o: o, ends: deadline.New(), now: o.clock.Now}
	seen := make(map[string]int, len(specs))
	conns := make([]transport.Conn, len(specs))
	var subs []transport.Conn
	for i, sp := range specs {
		if sp.bad != nil {
			return nil, sp.bad
		}
		if err := durableTopology(o.durable, i, sp.multi); err != nil {
			return nil, err
		}
		for _, s := range sp.servers {
			if j, dup := seen[s]; dup && j != i {
				return nil, invalid("nodes %d and %d are the same server %s: one server would cast two votes", j, i, s)
			}
			seen[s] = i
		}
		n := sp.mk(&c.wg)
		n.Coalesce(o.coalesce)
		n.Durable(o.durable)
		c.cluster = c.cluster || sp.cluster
		c.retries = c.retries || n.Retries()
		c.nodes = append(c.nodes, n)
		conns[i] = sp.conn
		if sp.pubsub {
			subs = append(subs, sp.conn)
		}
	}
	c.health = make([]nodeHealth, len(c.nodes))
	c.setupQuarantine(conns)
	c.setupDrift()
	if len(c.gates) > 0 {
		c.countsFn = func(i int) bool { return c.discount(i) == nil } // made once, not per round
	}
	id, err := instanceID(o.name)
	if err != nil {
		return nil, err
	}
	c.id, c.prefix = id, id+":"
	c.closing, c.stop = context.WithCancel(context.Background())
	c.renewer.epoch = o.clock.Now()
	if c.hub, err = handoff.NewConns(subs, handoff.Config{Quorum: c.need}); err != nil {
		return nil, invalid("%v", err)
	}
	c.startDrift() // last: nothing below can fail
	if lg := o.logger; lg != nil {
		lg.LogAttrs(context.Background(), slog.LevelInfo, "redlock: client ready",
			slog.String("client", c.id), slog.Any("nodes", c.Addrs()), slog.Int("need", c.need))
	}
	return c, nil
}

// durableTopology refuses a cluster or ring node under durable votes:
// WAITAOF confirms only the writes of its own connection to one server,
// and such a client sends the keyless WAITAOF to a shard of its choosing
// (or refuses it), not behind the command it should confirm.
func durableTopology(durable bool, i int, multi string) error {
	if durable && multi != "" {
		return invalid("node %d: durable votes need standalone or Sentinel-failover nodes (*redis.Client), not a %s: "+
			"WAITAOF confirms only the writes of its own connection to one server, and a cluster or ring client "+
			"sends it, keyless, to some shard, not behind the command on the key's", i, multi)
	}
	return nil
}

// dialOnce sets go-redis's DialerRetries to 1 where the field exists
// (newer go-redis versions dial a refusing node five times, 100ms apart,
// by default), so that the library keeps working with the go-redis its
// go.mod names as well as with newer ones its users pick.
func dialOnce(opt *redis.Options) {
	if f := reflect.ValueOf(opt).Elem().FieldByName("DialerRetries"); f.IsValid() && f.CanSet() && f.Kind() == reflect.Int {
		f.SetInt(1)
	}
}

// tlsDialer dials TLS within the call's ctx. go-redis's own TLS dial
// (tls.DialWithDialer) ignores the ctx: a node that hangs in the handshake
// would hold a call for the whole dial timeout (5 s), not the node timeout.
func tlsDialer(opt *redis.Options) func(ctx context.Context, network, addr string) (net.Conn, error) {
	timeout := opt.DialTimeout
	if timeout == 0 {
		timeout = 5 * time.Second // go-redis's default, for its own background dials
	}
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout, KeepAlive: 5 * time.Minute}, Config: opt.TLSConfig}
	return d.DialContext
}

// isNil reports a nil client, also a typed nil pointer in the interface.
func isNil(cl redis.UniversalClient) bool {
	if cl == nil {
		return true
	}
	v := reflect.ValueOf(cl)
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return v.IsNil()
	}
	return false
}

// ID returns the Client's instance id: the name given with WithName, a
// slash and a random UUID made by New (the UUID alone without a name). It
// begins every owner value this Client stores, and every log line of the
// Client carries it, so a lock found on a node (redlock inspect) leads to
// the process that holds it.
func (c *Client) ID() string { return c.id }

// inflight counts node calls in flight. Unlike sync.WaitGroup it allows
// Add while Close is waiting (a call that passed the closed check).
type inflight struct {
	mu   sync.Mutex
	n    int
	zero *sync.Cond
}

func (f *inflight) Add(d int) {
	f.mu.Lock()
	f.n += d
	if f.n == 0 && f.zero != nil {
		f.zero.Broadcast()
	}
	f.mu.Unlock()
}

func (f *inflight) Done() { f.Add(-1) }

func (f *inflight) Wait() {
	f.mu.Lock()
	if f.zero == nil {
		f.zero = sync.NewCond(&f.mu)
	}
	for f.n > 0 {
		f.zero.Wait()
	}
	f.mu.Unlock()
}

// enter registers a call that may touch the nodes; it reports false, and
// registers nothing, once Close has begun. Close waits for every call that
// entered (exit).
func (c *Client) enter() bool {
	c.ops.Add(1)
	if c.closed.Load() {
		c.ops.Done()
		return false
	}
	return true
}

func (c *Client) exit() { c.ops.Done() }

// Addrs returns the node addresses, in the order given to New.
func (c *Client) Addrs() []string {
	a := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		a[i] = n.Addr()
	}
	return a
}

// Quorum returns how many nodes must agree.
func (c *Client) Quorum() int { return c.need }

// Close stops the Client. Lock calls waiting between attempts stop at once
// with an error matching ErrClosed; a round in progress ends at its node
// deadline, and if it won, its lock is released again and the call fails
// with ErrClosed: once Close has returned, no call hands out a lock. Close
// waits for the Lock, Extend and Release calls in progress and for node
// calls still in flight (each at most its node deadline), then closes the
// connections made by NewFromURLs. Locks still held are not released; they
// expire with their TTL. Later calls fail with ErrClosed. Close is safe to
// call more than once and concurrently with other calls.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.stop()
	c.dm.wait()
	c.renewer.stop()
	c.hub.Close() // Lock calls waiting in a queue end with ErrClosed
	c.ops.Wait()
	c.wg.Wait()
	c.workers.Close()
	var first error
	for _, cl := range c.owned {
		if err := cl.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Lock acquires key for ttl, blocking and retrying until it succeeds or ctx
// is done. ttl must be at least 1ms and longer than the drift budget, or
// Watchdog for a lock renewed in the background. opts hold for this call
// and the Lock over the Client's options (see LockOption). On failure the
// error matches ErrNotObtained (and ctx.Err() if ctx ended it) and is a
// *QuorumError with the last round's per-node answers; bad input (an empty
// key, a zero or negative ttl, a nil option) matches ErrInvalidArgument and
// sends nothing. A lock that another Lock call of this Client released may
// be passed on to this call without a round trip (the local hand-off):
// then it has less than ttl left, though at least half of it; size work by
// l.Deadline() or l.Remaining(), not by ttl, or turn the hand-off off
// (WithLocalHandoff(LocalHandoffOff, 0)) to always get a fresh ttl.
func (c *Client) Lock(ctx context.Context, key string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return c.acquire(ctx, []string{key}, ttl, true, opts)
}

// TryLock makes a single attempt to acquire key for ttl. It fails with
// ErrNotObtained if the key is held elsewhere or too few nodes answered.
func (c *Client) TryLock(ctx context.Context, key string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return c.acquire(ctx, []string{key}, ttl, false, opts)
}

// LockKeys acquires several keys together, all or nothing on each node (one
// script per node), blocking like Lock. A node counts toward the quorum only
// if it granted every key. On a Redis Cluster node all keys must share a
// hash slot (use a {hash tag}). Between its attempts it waits for its
// backoff or until the nodes announce the release of one of its keys,
// whichever comes first; it is not passed a lock by the local hand-off.
func (c *Client) LockKeys(ctx context.Context, keys []string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return c.acquire(ctx, keys, ttl, true, opts)
}

// TryLockKeys is LockKeys with a single attempt.
func (c *Client) TryLockKeys(ctx context.Context, keys []string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return c.acquire(ctx, keys, ttl, false, opts)
}

// Run takes key in watchdog mode (blocking like Lock), calls fn with a ctx
// that is cancelled when ctx is done or the lock is lost, and releases the
// lock when fn returns. It returns fn's error joined (errors.Join) with the
// loss, if the lock was lost before fn returned (matching ErrLockLost,
// also context.Cause of fn's ctx), or with the release's error; or the
// acquisition's error if fn never ran. fn must stop touching the protected
// resource once its ctx is done. fn's ctx carries the Lock: LockFrom
// returns it (for its Token with WithFencing). If fn panics, the lock is
// released before the panic goes on.
func (c *Client) Run(ctx context.Context, key string, fn func(ctx context.Context) error, opts ...LockOption) error {
	if fn == nil {
		return invalid("nil function")
	}
	l, err := c.Lock(ctx, key, Watchdog, opts...)
	if err != nil {
		return err
	}
	work, cancel := l.bind(WithLock(ctx, l))
	returned := false
	defer func() {
		if !returned { // a panic a caller may recover must not leave the lock renewed on
			cancel()
			_ = l.Release(context.WithoutCancel(ctx))
		}
	}()
	ferr := fn(work)
	returned = true
	cancel()
	lost := l.Err()
	rerr := l.Release(context.WithoutCancel(ctx))
	if lost != nil {
		return errors.Join(ferr, lost)
	}
	return errors.Join(ferr, rerr)
}

type lockKey struct{}

// LockFrom returns the Lock that Run holds while it calls fn, from fn's
// ctx (or a ctx derived from it), or nil if ctx is not such a ctx. A nil
// Lock is safe to use: its Token is 0.
func LockFrom(ctx context.Context) *Lock {
	l, _ := ctx.Value(lockKey{}).(*Lock)
	return l
}

func (c *Client) checkKeys(keys []string) error {
	if len(keys) == 0 {
		return invalid("no keys")
	}
	seen := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		if k == "" {
			return invalid("empty key")
		}
		if len(k) > maxKeyLen {
			return invalid("key %s is %d bytes; at most %d are accepted", shortKey(k), len(k), maxKeyLen)
		}
		if _, dup := seen[k]; dup {
			return invalid("duplicate key %s", shortKey(k))
		}
		seen[k] = struct{}{}
	}
	if c.cluster && len(keys) > 1 {
		s := node.Slot(keys[0])
		for _, k := range keys[1:] {
			if node.Slot(k) != s {
				return invalid("keys %s and %s are in different cluster hash slots; use a {hash tag}", shortKey(keys[0]), shortKey(k))
			}
		}
	}
	return nil
}

func (c *Client) checkTTL(ttl time.Duration) error {
	if ttl.Milliseconds() < 1 {
		return invalid("ttl %v must be at least 1ms", ttl)
	}
	if ttl > MaxTTL {
		return invalid("ttl %v is longer than MaxTTL (%v); hold longer work with Watchdog", ttl, MaxTTL)
	}
	if d := driftBudget(ttl, c.o.driftFactor); ttl <= d+c.o.minValidity {
		return invalid("ttl %v is not longer than the drift budget %v plus min validity %v", ttl, d, c.o.minValidity)
	}
	return nil
}

// callTimeout is the per-node deadline for a TTL: the node timeout, capped
// at a tenth of the TTL so that one slow node cannot eat the validity.
func (c *Client) callTimeout(ttl time.Duration) time.Duration {
	if t := ttl / 10; t < c.o.nodeTimeout {
		return t
	}
	return c.o.nodeTimeout
}

// sleep waits d between attempts of Lock; it ends early with ctx's error,
// or with ErrClosed when Close begins.
func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.closing, cancel)
	defer stop()
	err := c.o.clock.Sleep(ctx, d)
	if err != nil && c.closed.Load() {
		return ErrClosed
	}
	return err
}

// round sends call to every node under the per-node deadline for ttl and
// returns at once; the calls share one deadline context, cancelled once
// the last of them has returned. A call's yes may carry a value
// (Vote.Value); calls without one return 0.
func (c *Client) round(ctx context.Context, o op, ttl time.Duration, need int, call quorum.ValueCall) *quorum.Round {
	return c.roundWithin(ctx, o, c.callTimeout(ttl), need, call)
}

// releaseTimeout bounds the calls of Release and of late clean-ups. They
// do not hold up the caller (Release returns at quorum), and a release cut
// short leaves a key that blocks everyone until its TTL, so they get ten
// node timeouts, at most a quarter of the TTL.
func (c *Client) releaseTimeout(ttl time.Duration) time.Duration {
	d := 10 * c.o.nodeTimeout
	if q := ttl / 4; q < d {
		d = q
	}
	if t := c.callTimeout(ttl); d < t {
		d = t
	}
	return d
}

// roundWithin is round with a given per-node deadline. The node calls do
// not end with ctx, only at that deadline: a command cut short on the
// socket may still run on the node with its answer unknown, while one that
// runs to its answer tells exactly what is there to undo. The caller's wait
// (Round.Wait) still ends with ctx.
func (c *Client) roundWithin(ctx context.Context, o op, timeout time.Duration, need int, call quorum.ValueCall) *quorum.Round {
	// One node: a release is waited for in full, and a wait on a ctx that
	// cannot end waits for the answer too, so the call runs right here.
	inline := len(c.nodes) == 1 && (o == opRelease || ctx.Done() == nil)
	ctx = c.ends.Within(ctx, timeout) // no timer of its own: the slot's is shared
	cfg := quorum.Config{N: len(c.nodes), Need: need, Track: &c.wg, Now: c.now, Counts: c.counts(o), Workers: &c.workers, Inline: inline}
	if len(c.o.nodeObs) > 0 {
		cfg.Observe = func(i int, v quorum.Vote) { c.observeNode(ctx, o, i, v) }
	}
	canSkip := c.canSkip(o, need)
	return quorum.StartValue(ctx, cfg, func(ctx context.Context, i int) (int64, bool, error) {
		return c.call(ctx, i, canSkip, call)
	})
}

// canSkip reports whether a round of o may leave out nodes that timed out
// recently: acquisitions, extensions and renewals may, as long as the
// others can still make the quorum; releases never do.
func (c *Client) canSkip(o op, need int) bool {
	if o == opRelease {
		return false
	}
	healthy := 0
	for i := range c.health {
		if !c.health[i].suspect.Load() {
			healthy++
		}
	}
	return healthy >= need && healthy < len(c.nodes)
}

// nodeHealth tracks whether a node's calls time out. A node whose last
// call timed out is suspect: acquisitions and extensions send it one call
// at a time (a probe) while the other nodes can make the quorum without it,
// instead of piling calls that will time out too onto a slow or frozen node
// (and the releases that would have to follow them). The first call that
// returns without a timeout clears it.
type nodeHealth struct {
	suspect atomic.Bool
	probing atomic.Bool
}

// call runs op on node i, applying and updating the node's health.
func (c *Client) call(ctx context.Context, i int, canSkip bool, op quorum.ValueCall) (int64, bool, error) {
	h := &c.health[i]
	if h.suspect.Load() {
		if h.probing.CompareAndSwap(false, true) {
			defer h.probing.Store(false)
		} else if canSkip {
			return 0, false, errNodeSkipped
		}
	}
	v, ok, err := op(ctx, i)
	switch {
	case untouched(err): // nothing reached the node: its health is unknown
	case err != nil && node.IsTimeout(err):
		h.suspect.Store(true)
	default:
		h.suspect.Store(false)
	}
	return v, ok, err
}

// backoff returns the wait before attempt+1: exponential, capped, with
// jitter in [d/2, d] so contenders spread out.
func (c *Client) backoff(o *callOptions, attempt int) time.Duration {
	d := o.retryMax
	if attempt < 30 {
		if e := o.retryMin << (attempt - 1); e > 0 && e < d {
			d = e
		}
	}
	half := d / 2
	return half + time.Duration(mrand.Int64N(int64(d-half)+1))
}

func (c *Client) results(out quorum.Outcome) []observe.NodeResult {
	r := make([]observe.NodeResult, len(out.Votes))
	for i, v := range out.Votes {
		r[i] = observe.NodeResult{Addr: c.nodes[i].Addr(), Vote: v.OK, Err: v.Err, Latency: v.Latency}
		switch {
		case v.Discounted:
			if r[i].Discounted = c.discount(i); r[i].Discounted == nil {
				r[i].Discounted = errDiscounted // the gate has cleared since the round
			}
		case errors.Is(v.Err, observe.ErrPending):
			r[i].Discounted = c.discount(i) // not waited for: would its yes have counted?
		}
	}
	return r
}
