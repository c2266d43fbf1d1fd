package core

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/admin"
	"github.com/redlock-go/redlock/fence"
	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/internal/node"
)

// registers reads key's fence register on every node (0 if absent).
func registers(t *testing.T, nodes []*harness.Node, key string) []int64 {
	t.Helper()
	vals, _ := raw(t, nodes, admin.FenceKey(key))
	out := make([]int64, len(vals))
	for i, v := range vals {
		if v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("node %d: register %q: %v", i, v, err)
			}
			out[i] = n
		}
	}
	return out
}

func TestFencingTokensIncrease(t *testing.T) {
	c, nodes := setup(t, 5, redlock.WithFencing())
	plain := client(t, nodes)
	ctx := context.Background()
	var last int64
	for i := 0; i < 5; i++ {
		l, err := c.TryLock(ctx, "f:inc", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if l.Token() <= last {
			t.Fatalf("acquisition %d: token %d, not above the previous %d", i, l.Token(), last)
		}
		last = l.Token()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A multi-key lock's token is above every earlier token of each key.
	l, err := c.TryLockKeys(ctx, []string{"f:inc", "f:other"}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() <= last {
		t.Fatalf("multi-key token %d, not above %d", l.Token(), last)
	}
	_ = l.Release(ctx)
	// Without fencing there is no token and no register is touched.
	p, err := plain.TryLock(ctx, "f:plain", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if p.Token() != 0 {
		t.Fatalf("token without fencing: %d", p.Token())
	}
	_ = p.Release(ctx)
	for i, v := range registers(t, nodes, "f:plain") {
		if v != 0 {
			t.Fatalf("node %d: a lock without fencing wrote register %d", i, v)
		}
	}
}

// TestFencingRaisesLaggingRegisters: when the granting nodes' registers
// disagree, the token is the highest, and it is raised on the others
// before the lock is handed out, so that any later quorum reads it. (A
// quorum of all nodes makes the round wait for node 4's higher value,
// which is above every node's clock floor.)
func TestFencingRaisesLaggingRegisters(t *testing.T) {
	c, nodes := setup(t, 5, redlock.WithFencing(), redlock.WithQuorum(redlock.AllNodes))
	ctx := context.Background()
	nc := nodes[4].Client()
	defer nc.Close()
	const high = int64(1) << 52 // microseconds: the year 2112
	if err := nc.Set(ctx, admin.FenceKey("f:lag"), high, 0).Err(); err != nil {
		t.Fatal(err)
	}
	l, err := c.TryLock(ctx, "f:lag", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token() != high+1 {
		t.Fatalf("token %d, want %d (node 4 held %d, granted it and returned one more)", l.Token(), high+1, high)
	}
	_ = l.Release(ctx)
	c.Close() // waits for every call, so the registers are final
	for i, v := range registers(t, nodes, "f:lag") {
		if v != high+1 {
			t.Fatalf("node %d: register %d after token %d was handed out with all nodes granting", i, v, high+1)
		}
	}
	// Any later holder reads it from a quorum, whichever nodes grant.
	for i := 0; i < 3; i++ { // take nodes away so that other quorums decide
		nodes[i].Freeze()
		d, err := harness.NewClient(t, harness.URLs(nodes), redlock.WithFencing(), redlock.WithNodeTimeout(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		l, err := d.TryLock(ctx, "f:lag", 2*time.Second)
		nodes[i].Thaw()
		if i < 2 && err != nil {
			t.Fatal(err)
		}
		if err == nil && l.Token() <= high+1 {
			t.Fatalf("with node %d frozen: token %d, not above %d", i, l.Token(), high+1)
		}
		if err == nil {
			_ = l.Release(ctx)
		}
		d.Close()
	}
}

// TestFencingRaiseNeedsTheLock: a raise that arrives where the lock is no
// longer held is refused, so it cannot land after a later holder read the
// register. Raises never lower a register, nor shorten its TTL.
func TestFencingRaiseNeedsTheLock(t *testing.T) {
	nodes := harness.Start(t, 1, harness.Config{})
	rc := nodes[0].Client()
	defer rc.Close()
	n := node.New(rc, nil)
	ctx := context.Background()
	keys, fences := []string{"f:r"}, []string{admin.FenceKey("f:r")}
	now := time.Now().UnixMicro()
	v, ok, err := n.DoValue(ctx, node.LockFenced(keys, fences, "me", time.Second, time.Hour))
	if err != nil || !ok || v < now-int64(time.Minute/time.Microsecond) {
		t.Fatalf("fenced lock: %d %v %v, want true and at least the clock in microseconds (%d)", v, ok, err, now)
	}
	pttl := func() time.Duration { return rc.PTTL(ctx, fences[0]).Val() }
	if p := pttl(); p <= 0 || p > time.Hour {
		t.Fatalf("register PTTL %v after a lock with keep 1h", p)
	}
	if ok, err := n.Do(ctx, node.RaiseFence(keys, fences, "me", v+7, 2*time.Hour)); err != nil || !ok {
		t.Fatalf("raise while held: %v %v", ok, err)
	}
	if ok, err := n.Do(ctx, node.RaiseFence(keys, fences, "me", v+5, time.Minute)); err != nil || !ok {
		t.Fatalf("lower raise while held: %v %v", ok, err)
	}
	if got := registers(t, nodes, "f:r")[0]; got != v+7 {
		t.Fatalf("register %d after raising to %d then %d, want %d (raise-only)", got, v+7, v+5, v+7)
	}
	if p := pttl(); p <= time.Hour {
		t.Fatalf("register PTTL %v after raises with keep 2h then 1m: shortened", p)
	}
	rc.Del(ctx, "f:r") // the lock expired here
	if ok, err := n.Do(ctx, node.RaiseFence(keys, fences, "me", v+9, time.Hour)); err != nil || ok {
		t.Fatalf("raise after the lock expired: %v %v, want refused", ok, err)
	}
	if got := registers(t, nodes, "f:r")[0]; got != v+7 {
		t.Fatalf("register %d after a refused raise, want %d", got, v+7)
	}
	// Held by someone else: the fenced lock says no and writes nothing.
	rc.Set(ctx, "f:r", "other", time.Second)
	if v, ok, err := n.DoValue(ctx, node.LockFenced(keys, fences, "me", time.Second, time.Hour)); err != nil || ok || v != 0 {
		t.Fatalf("fenced lock on a held key: %d %v %v", v, ok, err)
	}
	if got := registers(t, nodes, "f:r")[0]; got != v+7 {
		t.Fatalf("register %d after a refused lock, want %d", got, v+7)
	}
	// A register written without a TTL gets one at the next acquisition.
	rc.Set(ctx, fences[0], 3, 0)
	rc.Del(ctx, "f:r")
	if _, ok, err := n.DoValue(ctx, node.LockFenced(keys, fences, "me", time.Second, time.Hour)); err != nil || !ok {
		t.Fatalf("fenced lock over a register without TTL: %v %v", ok, err)
	}
	if p := pttl(); p <= 0 {
		t.Fatalf("register PTTL %v after a lock over a register without TTL", p)
	}
}

// TestFencingRejectsPausedHolder: a holder paused past its TTL (the pause
// is injected: it sleeps) wakes up and writes with its old token; the
// resource refuses it, and the new holder's writes stand. Without the
// token check (a plain SET) the stale write lands: the lost update that
// fencing prevents.
func TestFencingRejectsPausedHolder(t *testing.T) {
	nodes := harness.Start(t, 5, harness.Config{})
	a := client(t, nodes, redlock.WithFencing())
	b := client(t, nodes, redlock.WithFencing())
	res := nodes[0].Client() // the protected resource lives in Redis here
	defer res.Close()
	ctx := context.Background()
	// Lock, not TryLock: a 300 ms TTL caps the node deadline at 30 ms,
	// which a loaded machine misses now and then; a retry gets it.
	la, err := a.Lock(ctx, "f:pause", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	<-la.Done() // A's validity ends while it is "paused"
	time.Sleep(100 * time.Millisecond)
	lb, err := b.Lock(ctx, "f:pause", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if lb.Token() <= la.Token() {
		t.Fatalf("B's token %d not above paused A's %d", lb.Token(), la.Token())
	}
	if err := fence.Set(ctx, res, "balance", lb.Token(), lb.Owner(), "written by B"); err != nil {
		t.Fatal(err)
	}
	if err := fence.Set(ctx, res, "balance", lb.Token(), lb.Owner(), "written by B again"); err != nil {
		t.Fatalf("the same holder writing again: %v", err)
	}
	err = fence.Set(ctx, res, "balance", la.Token(), la.Owner(), "stale write by A")
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("A's stale write: %v, want ErrStale", err)
	}
	if v := res.Get(ctx, "balance").Val(); v != "written by B again" {
		t.Fatalf("resource holds %q after A's stale write", v)
	}
	// The same sequence without the check loses B's write.
	res.Set(ctx, "plain", "written by B", 0)
	res.Set(ctx, "plain", "stale write by A", 0)
	if v := res.Get(ctx, "plain").Val(); v != "stale write by A" {
		t.Fatalf("unfenced: %q", v)
	}
	_ = lb.Release(ctx)
}

// TestFencingTokensOrderHolders: clients contend for one key; each holder
// checks, inside its hold, that its token is above every token of an
// earlier holder.
func TestFencingTokensOrderHolders(t *testing.T) {
	nodes := harness.Start(t, 5, harness.Config{})
	var mu sync.Mutex
	var last int64
	var holds int
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		c := client(t, nodes, redlock.WithFencing())
		for g := 0; g < 3; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 10; i++ {
					l, err := c.Lock(context.Background(), "f:order", 2*time.Second)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if l.Token() <= last {
						t.Errorf("token %d after an earlier holder's %d", l.Token(), last)
					}
					last = l.Token()
					holds++
					mu.Unlock()
					if err := l.Release(context.Background()); err != nil {
						t.Error(err)
					}
				}
			}()
		}
	}
	wg.Wait()
	if holds != 90 {
		t.Fatalf("%d holds, want 90", holds)
	}
}

func TestFencingInput(t *testing.T) {
	nodes := harness.Start(t, 1, harness.Config{})
	rc := nodes[0].Client()
	defer rc.Close()
	ctx := context.Background()
	if err := fence.Set(ctx, rc, "x", 0, "me", "v"); err == nil {
		t.Fatal("token 0 accepted")
	}
	if err := fence.Set(ctx, rc, "", 1, "me", "v"); err == nil {
		t.Fatal("empty key accepted")
	}
	if err := fence.HSet(ctx, rc, "x", 1, "me", "field"); err == nil {
		t.Fatal("odd field/value list accepted")
	}
	if err := fence.Set(ctx, rc, "x", 1, "", "v"); err == nil || errors.Is(err, fence.ErrStale) {
		t.Fatalf("empty holder: %v, want an input error", err)
	}
	if err := fence.HSet(ctx, rc, "x", 1, "", "qty", 1); err == nil || errors.Is(err, fence.ErrStale) {
		t.Fatalf("empty holder on a hash: %v, want an input error", err)
	}
	if err := fence.HSet(ctx, rc, "h", 3, "me", "qty", 10, "by", "me"); err != nil {
		t.Fatal(err)
	}
	if err := fence.HSet(ctx, rc, "h", 2, "me", "qty", 99); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("lower token on a hash: %v", err)
	}
	if v := rc.HGet(ctx, "h", "qty").Val(); v != "10" {
		t.Fatalf("qty %q", v)
	}
	if n := rc.Exists(ctx, "x", fence.TokenKey("x")).Val(); n != 0 {
		t.Fatalf("a refused call wrote %d keys", n)
	}
}

// TestRunCarriesTheToken: fn's ctx carries Run's Lock (LockFrom), so a
// Run user writes with its token; outside Run there is none.
func TestRunCarriesTheToken(t *testing.T) {
	c, _ := setup(t, 3, redlock.WithFencing())
	ctx := context.Background()
	var tokens []int64
	for i := 0; i < 2; i++ {
		err := c.Run(ctx, "f:run", func(ctx context.Context) error {
			l := redlock.LockFrom(ctx)
			if l == nil || l.Key() != "f:run" {
				t.Errorf("LockFrom in Run: %v", l)
			}
			tokens = append(tokens, l.Token())
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(tokens) != 2 || tokens[0] < 1 || tokens[1] <= tokens[0] {
		t.Fatalf("tokens %v, want two increasing", tokens)
	}
	if l := redlock.LockFrom(ctx); l != nil || l.Token() != 0 {
		t.Fatalf("LockFrom outside Run: %v", l)
	}
}

// TestFenceRegistersExpire: fenced locks of many distinct keys, taken and
// released, leave no key without a TTL on any node: every fence register
// expires, so per-order or per-account locks do not pile up on the nodes.
func TestFenceRegistersExpire(t *testing.T) {
	c, nodes := setup(t, 5, redlock.WithFencing())
	ctx := context.Background()
	const keys = 201
	for i := 0; i < keys; i++ {
		l, err := c.TryLock(ctx, "f:exp:"+strconv.Itoa(i), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c.Close() // waits for every call, so the nodes' keys are final
	noTTL, withTTL := 0, 0
	for i, n := range nodes {
		rc := n.Client()
		left, _ := lockKeys(ctx, n)
		for _, k := range left {
			switch p := rc.PTTL(ctx, k).Val(); {
			case p > 0:
				withTTL++
			case p == -1:
				noTTL++
				if noTTL <= 3 {
					t.Errorf("node %d: key %q has no TTL", i, k)
				}
			}
		}
		for j := 0; j < keys; j++ {
			if p := rc.PTTL(ctx, admin.FenceKey("f:exp:"+strconv.Itoa(j))).Val(); p <= 0 {
				t.Errorf("node %d: register of key %d: PTTL %v, want > 0", i, j, p)
				break
			}
		}
		rc.Close()
	}
	if noTTL > 0 {
		t.Fatalf("%d keys without a TTL on %d nodes after %d fenced keys (%d with one)", noTTL, len(nodes), keys, withTTL)
	}
}

// TestFenceTokensIncreaseAcrossEmptyRestart: a majority restarts empty
// (no persistence), forgetting the registers, and the next holder's quorum
// is made of those nodes only: its token must still be above the earlier
// one, from the nodes' clocks. The restart quarantine is turned off: this
// tests the token floor, not the quarantine.
func TestFenceTokensIncreaseAcrossEmptyRestart(t *testing.T) {
	nodes := harness.Start(t, 5, harness.Config{})
	c := client(t, nodes, redlock.WithFencing(), redlock.WithRestartQuarantine(redlock.QuarantineOff),
		redlock.WithNodeTimeout(300*time.Millisecond))
	ctx := context.Background()
	l, err := c.TryLock(ctx, "f:restart", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	old := l.Token()
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes[:3] {
		if err := n.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes[3:] { // the quorum is the restarted nodes only
		n.Kill()
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l2, err := c.Lock(lctx, "f:restart", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Release(ctx)
	if l2.Token() <= old {
		t.Fatalf("token %d after an empty restart of a majority, not above the earlier holder's %d", l2.Token(), old)
	}
}

// TestFenceEqualTokenNeedsTheSameHolder: the resource takes a higher
// token, the same token again only from the holder that wrote with it, and
// refuses a lower token or the same token from another holder: two holders
// on one token (a repeated token) cannot both write.
func TestFenceEqualTokenNeedsTheSameHolder(t *testing.T) {
	nodes := harness.Start(t, 1, harness.Config{})
	rc := nodes[0].Client()
	defer rc.Close()
	ctx := context.Background()
	steps := []struct {
		token  int64
		holder string
		stale  bool
	}{
		{10, "a", false}, // first write
		{10, "a", false}, // the same holder again
		{10, "b", true},  // the same token, another holder
		{9, "a", true},   // lower
		{11, "b", false}, // higher
		{11, "a", true},  // the earlier holder with b's token
		{11, "b", false},
	}
	for i, st := range steps {
		val := fmt.Sprintf("step %d", i)
		err := fence.Set(ctx, rc, "eq", st.token, st.holder, val)
		herr := fence.HSet(ctx, rc, "eqh", st.token, st.holder, "v", val)
		for _, e := range []error{err, herr} {
			switch {
			case st.stale && !errors.Is(e, fence.ErrStale):
				t.Fatalf("step %d (token %d, holder %q): %v, want ErrStale", i, st.token, st.holder, e)
			case !st.stale && e != nil:
				t.Fatalf("step %d (token %d, holder %q): %v, want accepted", i, st.token, st.holder, e)
			}
		}
	}
	if v := rc.Get(ctx, "eq").Val(); v != "step 6" {
		t.Fatalf("resource holds %q, want the last accepted write", v)
	}
	if v := rc.HGet(ctx, "eqh", "v").Val(); v != "step 6" {
		t.Fatalf("hash holds %q, want the last accepted write", v)
	}
	// A token recorded without a holder (a bare number) is nobody's: its
	// equal is refused, a higher one taken.
	rc.Set(ctx, fence.TokenKey("old"), 5, 0)
	if err := fence.Set(ctx, rc, "old", 5, "a", "v"); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("equal token over a bare recorded token: %v, want ErrStale", err)
	}
	if err := fence.Set(ctx, rc, "old", 6, "a", "v"); err != nil {
		t.Fatal(err)
	}
}
