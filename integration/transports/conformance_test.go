// Package transports checks that every transport.Conn (go-redis, rueidis,
// valkey-go) keeps the seam's promises against a real redis-server: the
// script fallback, separate pipeline replies, pub/sub, the server facts
// and the error classes the lock tells apart.
package transports

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/internal/node"
	"github.com/redlock-go/redlock/transport"
)

func TestMain(m *testing.M) {
	harness.QuietRedisLogs()
	m.Run()
}

// each runs f against a fresh node through every transport.
func each(t *testing.T, f func(t *testing.T, c transport.Conn, n *harness.Node)) {
	for _, tr := range harness.Transports {
		t.Run(tr, func(t *testing.T) {
			n := harness.Start(t, 1, harness.Config{})[0]
			c, closeFn, err := harness.OpenConn(tr, n.URL())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(closeFn)
			f(t, c, n)
		})
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return c
}

// After SCRIPT FLUSH, EVALSHA gets NOSCRIPT as an error reply, and the
// node layer's script call falls back to EVAL.
func TestScriptFallback(t *testing.T) {
	each(t, func(t *testing.T, c transport.Conn, _ *harness.Node) {
		n := node.NewConn(c, nil)
		cmd := node.Lock([]string{"fb"}, "owner-1", time.Minute)
		for i := 0; i < 2; i++ {
			if _, err := c.Do(ctx(t), "script", "flush"); err != nil {
				t.Fatal(err)
			}
			ok, err := n.Do(ctx(t), cmd)
			if err != nil || !ok {
				t.Fatalf("Lock after SCRIPT FLUSH: %v %v", ok, err)
			}
		}
		_, err := c.Do(ctx(t), "evalsha", strings.Repeat("0", 40), 0)
		if !transport.IsErrorReply(err) || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
			t.Fatalf("EVALSHA of an unknown script: %v", err)
		}
	})
}

// Each command of a pipeline keeps its own reply: an error reply first or
// in the middle stands for no other command, and a nil reply is (nil, nil).
func TestPipelineRepliesSeparate(t *testing.T) {
	each(t, func(t *testing.T, c transport.Conn, _ *harness.Node) {
		cmds := [][]any{
			{"evalsha", strings.Repeat("0", 40), 0},
			{"set", "p", "v"},
			{"incr", "p"},
			{"get", "p"},
			{"get", "absent"},
			{"rpush", "l", "a", "b"},
			{"lrange", "l", 0, -1},
		}
		rs := make([]transport.Reply, len(cmds))
		c.Pipeline(ctx(t), cmds, rs)
		if !transport.IsErrorReply(rs[0].Err) || !strings.HasPrefix(rs[0].Err.Error(), "NOSCRIPT") {
			t.Errorf("EVALSHA: %+v", rs[0])
		}
		if rs[1].Err != nil || rs[1].Val != "OK" {
			t.Errorf("SET: %+v", rs[1])
		}
		if !transport.IsErrorReply(rs[2].Err) || !strings.HasPrefix(rs[2].Err.Error(), "ERR") {
			t.Errorf("INCR of a word: %+v", rs[2])
		}
		if rs[3].Err != nil || rs[3].Val != "v" {
			t.Errorf("GET: %+v", rs[3])
		}
		if rs[4].Err != nil || rs[4].Val != nil {
			t.Errorf("GET absent: %+v", rs[4])
		}
		if rs[5].Err != nil || rs[5].Val != int64(2) {
			t.Errorf("RPUSH: %+v", rs[5])
		}
		if a, ok := rs[6].Val.([]any); rs[6].Err != nil || !ok || len(a) != 2 || a[0] != "a" {
			t.Errorf("LRANGE: %+v", rs[6])
		}
	})
}

// A subscription confirms, delivers a message published on its channel,
// answers a PING and times out when nothing comes.
func TestSubscription(t *testing.T) {
	each(t, func(t *testing.T, c transport.Conn, _ *harness.Node) {
		s, err := c.Subscribe(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if err := s.Subscribe(ctx(t), "ch"); err != nil {
			t.Fatal(err)
		}
		next := func(want transport.EventKind) transport.Event {
			t.Helper()
			for {
				e, err := s.Receive(ctx(t), 2*time.Second)
				if err != nil {
					t.Fatalf("Receive: %v", err)
				}
				if e.Kind == want {
					return e
				}
			}
		}
		if e := next(transport.Subscribed); e.Channel != "ch" {
			t.Errorf("subscribed %+v", e)
		}
		if v, err := c.Do(ctx(t), "pubsub", "numsub", "ch"); err != nil || !strings.Contains(strings.ReplaceAll(fmtAny(v), " ", ""), "ch1") {
			t.Errorf("PUBSUB NUMSUB: %v %v", v, err)
		}
		if _, err := c.Do(ctx(t), "publish", "ch", "hello"); err != nil {
			t.Fatal(err)
		}
		if e := next(transport.Message); e.Channel != "ch" || e.Payload != "hello" {
			t.Errorf("message %+v", e)
		}
		if err := s.Ping(ctx(t)); err != nil {
			t.Fatal(err)
		}
		next(transport.Pong)
		if err := s.Unsubscribe(ctx(t), "ch"); err != nil {
			t.Fatal(err)
		}
		next(transport.Unsubscribed)
		if _, err := s.Receive(ctx(t), 50*time.Millisecond); !transport.IsTimeout(err) {
			t.Errorf("Receive with nothing to come: %v, want a timeout", err)
		}
	})
}

// INFO, CONFIG GET and TIME through the node layer: the identity and the
// TTL register, the node's clock.
func TestServerFacts(t *testing.T) {
	each(t, func(t *testing.T, c transport.Conn, _ *harness.Node) {
		n := node.NewConn(c, nil)
		if ok, err := n.Do(ctx(t), node.Lock([]string{"f"}, "o", time.Minute)); !ok || err != nil {
			t.Fatal(ok, err)
		}
		id, reg, err := n.IdentifyRegister(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if len(id.RunID) != 40 || id.Role != "master" || id.Version == "" || id.Uptime < 0 {
			t.Errorf("identity %+v", id)
		}
		if id.Evicts || id.FsyncAlways || id.AOF { // the harness's nodes: noeviction, no AOF
			t.Errorf("config facts %+v", id)
		}
		if len(reg.Entries) != 0 { // unbound: the plain Lock raised no register
			t.Errorf("register %+v", reg)
		}
		now, err := n.Time(ctx(t))
		if err != nil || now.Sub(time.Now()).Abs() > 5*time.Second {
			t.Errorf("TIME %v %v", now, err)
		}
		v, err := c.Do(ctx(t), "config", "get", "maxmemory-policy")
		if err != nil || !strings.Contains(fmtAny(v), "noeviction") {
			t.Errorf("CONFIG GET: %v %v", v, err)
		}
	})
}

// A call cut short by its deadline is a timeout that may have run; an
// error reply is none and did not run; a refused dial did not run.
func TestErrorClasses(t *testing.T) {
	each(t, func(t *testing.T, c transport.Conn, h *harness.Node) {
		n := node.NewConn(c, nil)
		short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := c.Do(short, "blpop", "nothing", 2)
		if !transport.IsTimeout(err) || !node.IsTimeout(err) || transport.IsErrorReply(err) || !n.MayHaveRun(err) {
			t.Errorf("BLPOP past the deadline: %v (timeout %v)", err, transport.IsTimeout(err))
		}
		if v, err := c.Do(ctx(t), "set", "e", "word"); err != nil || v != "OK" {
			t.Fatalf("SET after a timeout: %v %v", v, err)
		}
		_, err = c.Do(ctx(t), "incr", "e")
		if !transport.IsErrorReply(err) || transport.IsTimeout(err) || n.MayHaveRun(err) {
			t.Errorf("INCR of a word: %v", err)
		}
		_, err = c.Do(ctx(t), "lpush", "e", "x")
		if !transport.IsErrorReply(err) || !strings.HasPrefix(err.Error(), "WRONGTYPE") {
			t.Errorf("LPUSH on a string: %v", err)
		}
		_, err = n.Do(ctx(t), node.ReadLock("e", "o", time.Minute))
		if !node.IsWrongType(err) {
			t.Errorf("ReadLock on a string: %v", err)
		}
		h.Kill()
		dead, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel2()
		_, err = c.Do(dead, "get", "e")
		if err == nil || transport.IsErrorReply(err) {
			t.Errorf("GET on a dead node: %v", err)
		}
		t.Logf("dead node: %v (may have run: %v)", err, n.MayHaveRun(err))
	})
}

func fmtAny(v any) string {
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for k, e := range x {
				b.WriteString(k)
				walk(e)
			}
		case string:
			b.WriteString(x)
		case int64:
			b.WriteString(strconv.FormatInt(x, 10))
		}
	}
	walk(v)
	return b.String()
}
