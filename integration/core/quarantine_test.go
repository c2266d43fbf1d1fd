package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/observe"
)

// restartedBehindHolder locks key on nodes with client A for ttl, warms
// client b up (it learns every node's identity), restarts the first three
// nodes empty with SIGKILL, and returns b's TryLock of key.
func restartedBehindHolder(t *testing.T, nodes []*harness.Node, b *redlock.Client, key string, ttl time.Duration) (*redlock.Lock, error) {
	t.Helper()
	ctx := context.Background()
	a := client(t, nodes)
	if _, err := a.TryLock(ctx, key, ttl); err != nil {
		t.Fatal(err)
	}
	warm, err := b.TryLock(ctx, key+":warm", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes[:3] {
		if err := n.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	return b.TryLock(ctx, key, 2*time.Second)
}

func TestRestartQuarantineOffDoubleGrant(t *testing.T) {
	if tr := harness.Transport(); tr != "goredis" {
		// The scenario needs the first command after the restarts to reach
		// the new processes: go-redis checks a pooled connection before it
		// sends; rueidis and valkey-go send on the old one, whose EOF fails
		// the try (an unknown outcome, undone), so no double grant shows.
		t.Skipf("via %s the first command after a restart meets the old connection's EOF", tr)
	}
	nodes := harness.Start(t, 5, harness.Config{})
	b := client(t, nodes, redlock.WithRestartQuarantine(redlock.QuarantineOff))
	l, err := restartedBehindHolder(t, nodes, b, "q:off", time.Minute)
	if err != nil {
		t.Fatalf("quarantine off: expected the double grant, got %v", err)
	}
	_ = l.Release(context.Background())
}

func TestRestartQuarantineRefusesRestartedNodes(t *testing.T) {
	nodes := harness.Start(t, 5, harness.Config{})
	b := client(t, nodes, redlock.WithRestartQuarantine(5*time.Second))
	if _, err := restartedBehindHolder(t, nodes, b, "q:on", 5*time.Second); !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("quarantine on: B got the lock held by A (err %v)", err)
	}
	// A try may decide before every restarted node answered (each is
	// identified on its own goroutine before its command); the tries go on,
	// each refused, until each restarted node has reported its quarantine.
	var until time.Time
	seen := 0 // restarted nodes that reported ErrNodeQuarantined
	for try := 0; seen != 1<<3-1; try++ {
		if try == 50 {
			t.Fatalf("after 50 tries the restarted nodes reported the quarantine %03b", seen)
		}
		_, err := b.TryLock(context.Background(), "q:on", 2*time.Second)
		var qe *redlock.QuorumError
		if !errors.As(err, &qe) {
			t.Fatalf("quarantine on, try %d: B got the lock held by A (err %v)", try, err)
		}
		for i, r := range qe.Nodes[:3] {
			var q *observe.QuarantineError
			if !errors.As(r.Discounted, &q) && !errors.As(r.Err, &q) {
				if !errors.Is(r.Err, observe.ErrPending) {
					t.Fatalf("node %d: %+v, want ErrNodeQuarantined (or no answer yet)", i, r)
				}
				continue
			}
			seen |= 1 << i
			if q.Until.After(until) {
				until = q.Until
			}
		}
	}
	time.Sleep(time.Until(until)) // the window (A's 5 s TTL, read from the registers) ends; A's key is gone
	l, err := b.TryLock(context.Background(), "q:on", 2*time.Second)
	if err != nil {
		t.Fatalf("after the window: %v", err)
	}
	_ = l.Release(context.Background())
}

func TestRestartQuarantineSkipsFsyncAlways(t *testing.T) {
	nodes := harness.Start(t, 5, harness.Config{Persist: true})
	b := client(t, nodes, redlock.WithRestartQuarantine(time.Hour))
	_, err := restartedBehindHolder(t, nodes, b, "q:fsync", time.Minute)
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) || !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("A's lock survived on durable nodes, yet: %v", err)
	}
	for i, r := range qe.Nodes {
		if errors.Is(r.Discounted, observe.ErrNodeQuarantined) || errors.Is(r.Err, observe.ErrNodeQuarantined) {
			t.Errorf("node %d quarantined though it fsyncs every write: %+v", i, r)
		}
	}
	l, err := b.TryLock(context.Background(), "q:fsync:other", 2*time.Second)
	if err != nil {
		t.Fatalf("durable restarted nodes must vote: %v", err)
	}
	_ = l.Release(context.Background())
}

// TestRestartQuarantineOnByDefault: no option; the window is at least
// the default 45 s window, and b's first try after the restart is refused.
func TestRestartQuarantineOnByDefault(t *testing.T) {
	nodes := harness.Start(t, 5, harness.Config{})
	b := client(t, nodes)
	_, err := restartedBehindHolder(t, nodes, b, "q:default", time.Minute)
	if !errors.Is(err, redlock.ErrNotObtained) {
		t.Fatalf("default: B got the lock held by A (err %v)", err)
	}
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		t.Fatal(err)
	}
	found := false
	for _, r := range qe.Nodes[:3] {
		found = found || errors.Is(r.Discounted, observe.ErrNodeQuarantined) || errors.Is(r.Err, observe.ErrNodeQuarantined)
	}
	if !found {
		t.Errorf("no restarted node reported quarantined: %v", qe)
	}
}

// TestAliasVotesOnce: one server under two addresses (127.0.0.1:p and
// 127.0.0.2:p, which New cannot tell apart before traffic) must not vote
// twice. Another client holds a key on the third node; with quarantine
// off, the alias's two yes votes make a quorum of 2 of 3: the double
// grant. (A multi-key lock runs the owner-checked script, which says yes
// where our own value already is, as a client that retries does; a single
// SET NX would say no the second time.) With it on (the default), the second name's
// vote is discounted with ErrSameServer and the lock is refused.
func TestAliasVotesOnce(t *testing.T) {
	nodes := harness.Start(t, 2, harness.Config{Alias: true})
	_, port, _ := strings.Cut(nodes[0].Addr, ":")
	urls := []string{nodes[0].URL(), "redis://127.0.0.2:" + port, nodes[1].URL()}
	ctx := context.Background()
	other := nodes[1].Client()
	defer other.Close()
	for _, on := range []bool{false, true} {
		key := fmt.Sprintf("alias:%v", on)
		if err := other.Set(ctx, key, "someone-else", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		opts := []redlock.Option{redlock.WithNodeTimeout(time.Second)}
		if !on {
			opts = append(opts, redlock.WithRestartQuarantine(redlock.QuarantineOff))
		}
		c, err := harness.NewClient(t, urls, opts...)
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.TryLockKeys(ctx, []string{key, key + ":b"}, 2*time.Second)
		if !on {
			if err != nil {
				t.Fatalf("quarantine off: expected the alias's double vote to grant the held key, got %v", err)
			}
			_ = l.Release(ctx)
			c.Close()
			continue
		}
		var qe *redlock.QuorumError
		if !errors.As(err, &qe) {
			t.Fatalf("alias: the held key was granted by one server voting twice (err %v)", err)
		}
		// The alias is found before its vote (Discounted) or, when it was
		// identified on its own call's goroutine, instead of it (Err).
		why := qe.Nodes[1].Discounted
		if why == nil {
			why = qe.Nodes[1].Err
		}
		var se *observe.SameServerError
		if qe.Nodes[1].Vote || !errors.As(why, &se) || !errors.Is(why, observe.ErrSameServer) || se.Other != urls[0][len("redis://"):] {
			t.Fatalf("node 1: %+v, want ErrSameServer naming %s", qe.Nodes[1], urls[0])
		}
		c.Close()
	}
}

// TestQuarantineCoversOtherClientsTTL: the window must cover every lock
// any client may hold, not only the TTLs this Client used. B holds a key
// for 6 s; three of five nodes restart empty; A, which has used only 1 s
// locks, was created before the restart and knows every node. A's tries
// for 3 s after the restart must all be refused: B's lock is still valid.
// Twice: with the default deployment setting, and with a setting of 1 s,
// too short for B: then only the TTL register B raised covers B's lock.
func TestQuarantineCoversOtherClientsTTL(t *testing.T) {
	t.Run("default", func(t *testing.T) { otherClientsTTL(t) })
	t.Run("register", func(t *testing.T) { otherClientsTTL(t, redlock.WithRestartQuarantine(time.Second)) })
}

func otherClientsTTL(t *testing.T, opts ...redlock.Option) {
	nodes := harness.Start(t, 5, harness.Config{})
	ctx := context.Background()
	a, b := client(t, nodes, opts...), client(t, nodes, opts...)
	warm, err := a.TryLock(ctx, "q:other:warm", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	held, err := b.TryLock(ctx, "q:other", 6*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes[:3] {
		if err := n.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	for try := 0; ; try++ {
		if held.Remaining() < 3*time.Second {
			break
		}
		l, err := a.TryLock(ctx, "q:other", time.Second)
		if err == nil {
			_ = l.Release(ctx)
			t.Fatalf("try %d: A got the key while B's lock has %v of validity left", try, held.Remaining())
		}
		if !errors.Is(err, redlock.ErrNotObtained) {
			t.Fatalf("try %d: %v", try, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestQuarantineRegisterRefusedByACL: a user whose ACL does not reach the
// TTL register (keys q:* only) cannot lock: each node's error says the
// register was not written and why, no lock key is left, and once the ACL
// grants the register the same Client locks (no node stays "refused").
func TestQuarantineRegisterRefusedByACL(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	ctx := context.Background()
	urls := make([]string, len(nodes))
	setuser := func(extra ...interface{}) {
		for _, n := range nodes {
			admin := n.Client()
			args := append([]interface{}{"acl", "setuser", "locker", "on", ">pw", "resetkeys", "~q:*", "-@all",
				"+set", "+get", "+del", "+pexpire", "+eval", "+evalsha", "+info", "+config|get"}, extra...)
			err := admin.Do(ctx, args...).Err()
			admin.Close()
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	setuser()
	for i, n := range nodes {
		urls[i] = "redis://locker:pw@" + n.Addr
	}
	c, err := harness.NewClient(t, urls, redlock.WithNodeTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.TryLock(ctx, "q:acl", time.Second)
	if !errors.Is(err, redlock.ErrNotObtained) || !strings.Contains(err.Error(), "TTL register") || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("register refused by the ACL: %v, want ErrNotObtained naming the register and NOPERM", err)
	}
	for i, n := range nodes {
		if keys, err := lockKeys(ctx, n); err != nil || len(keys) != 0 {
			t.Fatalf("node %d: keys %v (%v) after a refused lock, want none", i, keys, err)
		}
	}
	setuser("~redlock:ttl", "~redlock:max-ttl", "~{redlock:ttl}:aof", "+time", "+hget", "+hset", "+hgetall", "+hdel", "+pexpireat")
	l, err := c.TryLock(ctx, "q:acl", time.Second)
	if err != nil {
		t.Fatalf("register granted now: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestFirstLockDoesNotWaitForFrozenNode: a Client's first contact with its
// nodes learns their identities before the first round, but waits only
// for enough of them to make a quorum: one frozen node of five must not
// hold up the first Lock until its node deadline. Before the wait was cut
// to a quorum, the first TryLock here returned after 10 s.
func TestFirstLockDoesNotWaitForFrozenNode(t *testing.T) {
	nodes := harness.Start(t, 5, harness.Config{})
	const nodeTimeout = 20 * time.Second
	nodes[4].Freeze()
	defer nodes[4].Thaw()
	c := client(t, nodes, redlock.WithNodeTimeout(nodeTimeout))
	ctx := context.Background()
	start := time.Now()
	l, err := c.TryLock(ctx, "first-contact", 10*nodeTimeout) // node calls get the whole node timeout
	took := time.Since(start)
	if err != nil {
		t.Fatalf("first TryLock with one node frozen: %v", err)
	}
	if took >= nodeTimeout/4 { // a wait for the frozen node lasts until its socket timeout (10 s)
		t.Fatalf("first TryLock took %v: it waited for the frozen node (node timeout %v)", took, nodeTimeout)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	nodes[4].Thaw() // its identification and release end now, so Close does not wait for the node timeout
}
