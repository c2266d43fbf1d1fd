package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// durableNode is a Durable node over a fake that answers WAITAOF with
// reply, coalescing or not.
func durableNode(t *testing.T, reply string, coalesce bool) (*Node, *answering) {
	a := newAnswering(t)
	a.waitaof = reply
	c := redis.NewClient(&redis.Options{Addr: a.ln.Addr().String(), ContextTimeoutEnabled: true,
		MaxRetries: -1, Protocol: 2, DisableIdentity: true})
	track := new(sync.WaitGroup)
	n := New(c, track)
	n.Coalesce(coalesce)
	n.Durable(true)
	t.Cleanup(func() {
		track.Wait()
		_ = c.Close()
		_ = a.ln.Close()
		a.wg.Wait()
	})
	return n, a
}

// A yes stands only with WAITAOF's confirmation; without it the call fails
// with a NotDurableError that may have run (the lock is undone), and a no
// stays a no. Releases are not confirmed.
func TestDurableVoteNeedsConfirmation(t *testing.T) {
	for _, c := range []struct {
		name, reply string
		want        string // "yes", "no" or the error's text
		not         string // words the error must not have
	}{
		{"fsynced", "*2\r\n:1\r\n:0\r\n", "yes", ""},
		{"not in time", "*2\r\n:0\r\n:0\r\n", "not fsynced within", ""},
		{"refused", "-ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.\r\n", "WAITAOF refused (it needs Redis 7.2+ or Valkey 8.0+ with appendonly yes): ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled", ""},
		{"unknown", "-ERR unknown command 'waitaof', with args beginning with: '1' '0' '50'\r\n", "WAITAOF refused (it needs Redis 7.2+ or Valkey 8.0+ with appendonly yes): ERR unknown command", ""},
		{"ACL", "-NOPERM User locker has no permissions to run the 'waitaof' command\r\n",
			"WAITAOF refused by the node's ACL (the user needs +waitaof, as the lock's ACL line in docs/deployment.md says for durable votes): NOPERM User locker", "Redis 7.2"},
	} {
		for _, coalesce := range []bool{false, true} {
			n, a := durableNode(t, c.reply, coalesce)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			ok, err := n.Do(ctx, Lock([]string{"ok1"}, "v", time.Minute))
			got := map[bool]string{true: "yes", false: "no"}[ok]
			if err != nil {
				got = err.Error()
				if !errors.Is(err, ErrNotDurable) || !n.MayHaveRun(err) {
					t.Errorf("%s: %v: want ErrNotDurable that may have run", c.name, err)
				}
			}
			if !strings.Contains(got, c.want) || c.not != "" && strings.Contains(got, c.not) {
				t.Errorf("%s (coalesce %v): %q, want %q (and no %q)", c.name, coalesce, got, c.want, c.not)
			}
			if ok, err := n.Do(ctx, Lock([]string{"no2"}, "v", time.Minute)); ok || err != nil {
				t.Errorf("%s: a refusal: %v %v, want a plain no", c.name, ok, err)
			}
			if ok, err := n.Do(ctx, Release([]string{"ok3"}, "v", false)); !ok || err != nil {
				t.Errorf("%s: a release: %v %v, want yes, unconfirmed", c.name, ok, err)
			}
			cancel()
			a.mu.Lock()
			if k := a.got["waitaof "]; k != 2 {
				t.Errorf("%s: %d WAITAOF sent, want 2 (one per grant, none for the release)", c.name, k)
			}
			a.mu.Unlock()
		}
	}
}

// WAITAOF's timeout leaves part of the node's deadline for the node's own
// answer; a WAITAOF that gets no answer by the deadline is named so, not
// taken for a server that lacks it.
func TestDurableWaitLeavesMargin(t *testing.T) {
	for _, coalesce := range []bool{false, true} {
		n, a := durableNode(t, "hang", coalesce)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		ok, err := n.Do(ctx, Lock([]string{"ok1"}, "v", time.Minute))
		cancel()
		// Newer go-redis versions set the connection's error on the
		// command before WAITAOF too: the call then fails with it, of
		// unknown outcome all the same.
		if ok || err == nil || !n.MayHaveRun(err) || strings.Contains(err.Error(), "needs Redis") ||
			errors.Is(err, ErrNotDurable) && !strings.Contains(err.Error(), "no answer to WAITAOF (timeout ") {
			t.Errorf("coalesce %v: %v %v, want an error of unknown outcome: no answer to WAITAOF", coalesce, ok, err)
		}
		a.mu.Lock()
		sent, _ := time.ParseDuration(a.waitArg + "ms")
		a.mu.Unlock()
		if sent < 100*time.Millisecond || sent > 160*time.Millisecond {
			t.Errorf("coalesce %v: WAITAOF timeout %v for a 200ms deadline, want 100ms to 160ms (a fifth left for the answer)", coalesce, sent)
		}
	}
}

// Coalesced grants share one WAITAOF per pipeline, and a refused one does
// not turn the others' replies into errors.
func TestDurableBatchOneWAITAOF(t *testing.T) {
	n, a := durableNode(t, "*2\r\n:1\r\n:0\r\n", true)
	inflight := inFlight(n, 10*time.Second)
	cmds := []*Cmd{Lock([]string{"ok1"}, "v", time.Minute), Extend([]string{"ok2"}, "v", time.Minute),
		Lock([]string{"no3"}, "v", time.Minute), Release([]string{"ok4"}, "v", false), LockNew([]string{"ok5"}, "v", time.Minute)}
	want := []string{"yes", "yes", "no", "yes", "yes"}
	got := make([]string, len(cmds))
	var wg sync.WaitGroup
	for i, cmd := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ok, err := n.Do(ctx, cmd)
			got[i] = map[bool]string{true: "yes", false: "no"}[ok]
			if err != nil {
				got[i] = err.Error()
			}
		}()
		waitQueued(n, i+1)
	}
	close(a.gate)
	wg.Wait()
	if err := <-inflight; err != nil {
		t.Errorf("call in flight: %v", err)
	}
	for i := range cmds {
		if got[i] != want[i] {
			t.Errorf("call %d: %q, want %s", i, got[i], want[i])
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if k := a.got["waitaof "]; k != 2 { // the call in flight's own, and the batch's one
		t.Errorf("%d WAITAOF sent, want 2", k)
	}
}

// A durable batch whose first command gets an error reply (a SET NX
// refused: a lock held by another; NOPERM; NOSCRIPT) keeps every reply its
// own, WAITAOF's too: go-redis's copy of the first error onto the others
// would fail every confirmed yes of the batch as not durable.
func TestDurableBatchFirstRefused(t *testing.T) {
	for _, first := range []string{"nil0", "noperm0", "noscript0"} {
		t.Run(first, func(t *testing.T) {
			n, a := durableNode(t, "*2\r\n:1\r\n:0\r\n", true)
			inflight := inFlight(n, 10*time.Second)
			calls := []batchCall{
				firstCall(first),
				{LockNew([]string{"ok1"}, "v", time.Minute), "yes"},
				{Lock([]string{"ok2"}, "v", time.Minute), "yes"},
				{Extend([]string{"ok3"}, "v", time.Minute), "yes"},
				{LockNew([]string{"nil4"}, "v", time.Minute), "no"},
			}
			got := make([]string, len(calls))
			var wg sync.WaitGroup
			for i, call := range calls {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					ok, err := n.Do(ctx, call.cmd)
					got[i] = map[bool]string{true: "yes", false: "no"}[ok]
					if err != nil {
						got[i] = err.Error()
					}
				}()
				waitQueued(n, i+1) // one batch, calls[0] first
			}
			close(a.gate)
			wg.Wait()
			if err := <-inflight; err != nil {
				t.Errorf("call in flight: %v", err)
			}
			for i, call := range calls {
				if !strings.HasPrefix(got[i], call.want) {
					t.Errorf("call %d (%v): %q, want %s", i, call.cmd.args[:2], got[i], call.want)
				}
			}
		})
	}
}

// ExtendMany on a Durable node: a first script call refused (NOPERM)
// leaves the next one's extensions confirmed by WAITAOF.
func TestDurableExtendManyFirstRefused(t *testing.T) {
	n, _ := durableNode(t, "*2\r\n:1\r\n:0\r\n", false)
	rs := make([]Renewal, ManyPerScript+1) // two script calls in one pipeline
	for j := range rs {
		rs[j] = Renewal{Keys: []string{fmt.Sprintf("ok%d", j)}, Owner: "v", TTL: time.Minute}
	}
	rs[0].Keys[0] = "noperm0" // the first call's first key: the fake refuses the call
	ok, errs := make([]bool, len(rs)), make([]error, len(rs))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = n.ExtendMany(ctx, rs, ok, errs)
	if last := len(rs) - 1; !ok[last] || errs[last] != nil {
		t.Errorf("the second call's lock: ok %v, err %v; want extended and confirmed", ok[last], errs[last])
	}
	if ok[0] || errs[0] == nil || !strings.Contains(errs[0].Error(), "NOPERM") {
		t.Errorf("the first call's lock: ok %v, err %v; want its NOPERM", ok[0], errs[0])
	}
}
