// Package goredisconn is the transport.Conn of a go-redis v9 client: the
// library's own adapter, behind redlock.New.
package goredisconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/transport"
)

// Conn is a go-redis client as a transport.Conn. Safe for concurrent use.
type Conn struct {
	c redis.UniversalClient
}

// New wraps c; the client stays the caller's.
func New(c redis.UniversalClient) *Conn { return &Conn{c: c} }

// Client returns the wrapped client.
func (c *Conn) Client() redis.UniversalClient { return c.c }

// Do implements transport.Conn.
func (c *Conn) Do(ctx context.Context, args ...any) (any, error) {
	cmd := newCmd(ctx, args)
	_ = c.c.Process(ctx, cmd)
	r := result(cmd, nil)
	return r.Val, r.Err
}

// Pipeline implements transport.Conn. A single command goes without a
// pipeline.
func (c *Conn) Pipeline(ctx context.Context, cmds [][]any, replies []transport.Reply) {
	if len(cmds) == 1 {
		replies[0].Val, replies[0].Err = c.Do(ctx, cmds[0]...)
		return
	}
	RunPipeline(ctx, c.c.Pipeline(), cmds, replies)
}

// RunPipeline is Conn.Pipeline on pipeline p (of any go-redis Cmdable).
func RunPipeline(ctx context.Context, p redis.Pipeliner, cmds [][]any, replies []transport.Reply) {
	rc := make([]*redis.Cmd, len(cmds))
	for i, args := range cmds {
		rc[i] = newCmd(ctx, args)
		_ = p.Process(ctx, rc[i])
	}
	_, perr := p.Exec(ctx)
	for i, cmd := range rc {
		replies[i] = result(cmd, perr)
	}
}

// newCmd makes args a command whose first key go-redis finds (a cluster
// client routes by it): after EVALSHA/EVAL's script and key count, else
// right after the verb.
func newCmd(ctx context.Context, args []any) *redis.Cmd {
	cmd := redis.NewCmd(ctx, args...)
	if v, _ := args[0].(string); v == "evalsha" || v == "eval" {
		cmd.SetFirstKeyPos(3)
	} else {
		cmd.SetFirstKeyPos(1)
	}
	return cmd
}

// result reads cmd's own reply. go-redis v9 (up to at least v9.14) takes
// the first command's error reply in a pipeline as the pipeline's and sets
// it on every command that succeeded, whose values it leaves in place: an
// error reply carries no value, so a command holding both got the error
// copied, and succeeded. A command that got neither was not reached: the
// pipeline's error (no connection) is its own.
func result(cmd *redis.Cmd, perr error) transport.Reply {
	v, err := cmd.Val(), cmd.Err()
	switch {
	case err != nil && v != nil && isReply(err):
		err = nil
	case err == redis.Nil:
		return transport.Reply{}
	case err == nil && v == nil && perr != nil:
		err = perr
	}
	if err != nil {
		return transport.Reply{Err: err}
	}
	return transport.Reply{Val: normalize(v)}
}

// isReply reports whether err is the server's error reply. Apart from
// result so that its target escapes to the heap only on the error path.
func isReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// normalize turns RESP3 maps (map[interface{}]interface{}) into
// map[string]any, at any depth.
func normalize(v any) any {
	switch x := v.(type) {
	case []interface{}:
		for i := range x {
			x[i] = normalize(x[i])
		}
	case map[interface{}]interface{}:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = normalize(e)
		}
		return m
	}
	return v
}

// Addr implements transport.Conn (see Addr).
func (c *Conn) Addr() string { return Addr(c.c) }

// HonorsDeadlines implements transport.DeadlineHonorer.
func (c *Conn) HonorsDeadlines() bool { return HonorsContext(c.c) }

// MayRetry implements transport.Retrier.
func (c *Conn) MayRetry() bool { return MayRetry(c.c) }

// OnDial implements transport.DialNotifier with a go-redis DialHook (it
// stays on the client).
func (c *Conn) OnDial(f func()) { c.c.AddHook(dialHook(f)) }

type dialHook func()

func (h dialHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err == nil {
			h()
		}
		return conn, err
	}
}

func (dialHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (dialHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Plain reports a client of one server (standalone or Sentinel failover):
// not a cluster or ring.
func (c *Conn) Plain() bool {
	_, ok := c.c.(*redis.Client)
	return ok
}

// Cluster reports a cluster client.
func (c *Conn) Cluster() bool {
	_, ok := c.c.(*redis.ClusterClient)
	return ok
}

// HonorsContext reports whether client applies ctx deadlines to its socket
// reads and writes (go-redis does only with ContextTimeoutEnabled).
// Unknown client types are assumed not to.
func HonorsContext(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// MayRetry reports whether client sends a command again after a network
// error (go-redis MaxRetries, 3 by default; -1 turns it off; cluster
// clients also retry through MaxRedirects). Unknown client types are
// assumed to.
func MayRetry(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().MaxRetries > 0 // normalized: 0 means off
	case *redis.ClusterClient:
		o := c.Options()
		return o.MaxRetries > 0 || o.MaxRedirects > 0
	case *redis.Ring:
		return c.Options().MaxRetries > 0
	}
	return true
}

// Addr names client by the server(s) it talks to, for errors, logs and the
// duplicate check. Clients whose target cannot be read (sentinel failover
// clients, unknown types) are named by identity.
func Addr(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		o := c.Options()
		if o.Addr == "FailoverClient" {
			break
		}
		if o.DB != 0 {
			return fmt.Sprintf("%s/%d", o.Addr, o.DB)
		}
		return o.Addr
	case *redis.ClusterClient:
		a := append([]string(nil), c.Options().Addrs...)
		sort.Strings(a)
		return "cluster:" + strings.Join(a, ",")
	case *redis.Ring:
		var a []string
		for _, v := range c.Options().Addrs {
			a = append(a, v)
		}
		sort.Strings(a)
		return "ring:" + strings.Join(a, ",")
	}
	return fmt.Sprintf("%T@%p", c, c)
}
