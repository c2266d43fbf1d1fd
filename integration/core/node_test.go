package core

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/integration/harness"
	"github.com/redlock-go/redlock/internal/node"
)

// The lock script resets the TTL where the same owner already holds the
// key (a retry of one acquisition) and refuses any other owner.
func TestNodeScripts(t *testing.T) {
	nodes := harness.Start(t, 1, harness.Config{})
	rc := nodes[0].Client()
	defer rc.Close()
	n := node.New(rc, nil)
	ctx := context.Background()
	keys := []string{"a", "b"}
	ok, err := n.Do(ctx, node.Lock(keys, "me", 5*time.Second))
	if !ok || err != nil {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	ok, err = n.Do(ctx, node.Lock(keys, "me", 30*time.Second))
	if !ok || err != nil {
		t.Fatalf("re-acquire by same owner: %v %v", ok, err)
	}
	// More than the first TTL left: only the reset can give that.
	if d := rc.PTTL(ctx, "b").Val(); d <= 5*time.Second {
		t.Fatalf("retry did not reset TTL: %v", d)
	}
	if ok, _ := n.Do(ctx, node.Lock([]string{"c", "b"}, "other", time.Second)); ok {
		t.Fatal("other owner acquired")
	}
	if rc.Exists(ctx, "c").Val() != 0 {
		t.Fatal("refused multi-key acquire wrote a key")
	}
	if ok, _ := n.Do(ctx, node.Extend(keys, "other", time.Second)); ok {
		t.Fatal("other owner extended")
	}
	if ok, _ := n.Do(ctx, node.Release(keys, "other", true)); ok || rc.Exists(ctx, "a", "b").Val() != 2 {
		t.Fatal("other owner released")
	}
	if ok, err := n.Do(ctx, node.Release(keys, "me", false)); !ok || err != nil {
		t.Fatalf("release: %v %v", ok, err)
	}
	if ok, _ := n.Do(ctx, node.Extend(keys, "me", time.Second)); ok || rc.Exists(ctx, "a").Val() != 0 {
		t.Fatal("extend re-created a released key")
	}
	// SET NX for a fresh owner: yes on a free key with the TTL, no on a
	// held one; one prepared command serves several calls.
	fresh := node.LockNew([]string{"s"}, "me", 5*time.Second)
	before := time.Now()
	if ok, err := n.Do(ctx, fresh); !ok || err != nil {
		t.Fatalf("SET NX on a free key: %v %v", ok, err)
	}
	// The TTL was set after before: at most 5s, at least 5s less the time
	// since, less a millisecond: the node's clock and PTTL count whole
	// milliseconds, so one tick between SET and PTTL takes a whole one off.
	d := rc.PTTL(ctx, "s").Val()
	if least := 5*time.Second - time.Since(before) - time.Millisecond; d > 5*time.Second || d < least || rc.Get(ctx, "s").Val() != "me" {
		t.Fatalf("SET NX wrote %q with TTL %v, want within [%v, 5s]", rc.Get(ctx, "s").Val(), d, least)
	}
	if ok, err := n.Do(ctx, fresh); ok || err != nil {
		t.Fatalf("SET NX on a held key: %v %v", ok, err)
	}
	// A release whose script the node does not know yet falls back to EVAL.
	if err := rc.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if ok, err := n.Do(ctx, node.Release([]string{"s"}, "me", false)); !ok || err != nil {
		t.Fatalf("release after SCRIPT FLUSH: %v %v", ok, err)
	}
	if n.Addr() != nodes[0].Addr {
		t.Fatalf("Addr %q", n.Addr())
	}
}

// Coalesced calls from many goroutines each get their own answer: every
// lock and release of a goroutine's own key says yes, in order, with
// clients that honor ctx deadlines and clients that do not (guarded).
func TestNodeCoalescing(t *testing.T) {
	nodes := harness.Start(t, 1, harness.Config{})
	for _, honor := range []bool{true, false} {
		t.Run(fmt.Sprintf("ctx-deadlines-%v", honor), func(t *testing.T) {
			rc := redis.NewClient(&redis.Options{Addr: nodes[0].Addr, ContextTimeoutEnabled: honor, MaxRetries: -1})
			defer rc.Close()
			var track sync.WaitGroup
			n := node.New(rc, &track)
			n.Coalesce(true)
			var wg sync.WaitGroup
			fail := make(chan string, 64)
			// Script flushes meanwhile: lock scripts then meet NOSCRIPT
			// error replies in the same pipelines as other calls' SET NX,
			// whose own replies must stay theirs.
			stop := make(chan struct{})
			flushed := make(chan struct{})
			go func() {
				defer close(flushed)
				for {
					select {
					case <-stop:
						return
					default:
					}
					_ = rc.ScriptFlush(context.Background()).Err()
					time.Sleep(time.Millisecond)
				}
			}()
			for g := 0; g < 64; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					key := fmt.Sprintf("co:%v:%d", honor, g)
					for i := 0; i < 100; i++ {
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						owner := fmt.Sprintf("o%d", i)
						acq := node.LockNew([]string{key}, owner, time.Minute)
						if i%2 == 0 {
							acq = node.Lock([]string{key}, owner, time.Minute) // a script: NOSCRIPT after a flush
						}
						ok, err := n.Do(ctx, acq)
						if ok && err == nil {
							ok, err = n.Do(ctx, node.Release([]string{key}, owner, false))
						}
						cancel()
						if !ok || err != nil {
							fail <- fmt.Sprintf("%s cycle %d: %v %v", key, i, ok, err)
							return
						}
					}
				}(g)
			}
			wg.Wait()
			close(stop)
			<-flushed
			track.Wait()
			close(fail)
			for f := range fail {
				t.Error(f)
			}
			if k := rc.Keys(context.Background(), "co:*").Val(); len(k) != 0 {
				t.Errorf("keys left: %v", k)
			}
		})
	}
}

// Holder reads a key's value and PTTL: nothing for an absent key, the
// value and its TTL for a string, Other for a key of another type (a
// typed lock), and an error from a node that does not answer.
func TestNodeHolder(t *testing.T) {
	nodes := harness.Start(t, 1, harness.Config{})
	rc := nodes[0].Client()
	defer rc.Close()
	n := node.New(rc, nil)
	ctx := context.Background()
	if h, err := n.Holder(ctx, "h:none"); err != nil || h != (node.Holding{}) {
		t.Fatalf("absent key: %+v %v", h, err)
	}
	rc.Set(ctx, "h:str", "someone", 5*time.Second)
	h, err := n.Holder(ctx, "h:str")
	if err != nil || h.Value != "someone" || h.Left <= 4*time.Second || h.Left > 5*time.Second || h.Other {
		t.Fatalf("string key: %+v %v", h, err)
	}
	rc.Set(ctx, "h:forever", "x", 0)
	if h, err := n.Holder(ctx, "h:forever"); err != nil || h.Value != "x" || h.Left != 0 {
		t.Fatalf("key without TTL: %+v %v", h, err)
	}
	rc.HSet(ctx, "h:hash", "f", "v")
	if h, err := n.Holder(ctx, "h:hash"); err != nil || !h.Other || h.Value != "" {
		t.Fatalf("hash key: %+v %v", h, err)
	}
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer dead.Close()
	if _, err := node.New(dead, nil).Holder(ctx, "h:str"); err == nil {
		t.Fatal("unreachable node: no error")
	}
}
