package core

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
)

// A coalescing Client floods no frozen node: whatever many goroutines do,
// the node has one call or pipeline in flight at a time (the calls behind
// it wait in its queue and leave unsent at their deadlines), every key an
// acquisition reached there gets a release after it (a release still
// queued when its caller leaves is sent late, not dropped), and once the
// node thaws no key is left anywhere. The hook on the frozen node's client
// sees every command and pipeline sent there. Broken coalescing fails: a
// second call sent while one is stuck shows as two in flight; a release
// dropped from the queue leaves its key on the node (and no release
// recorded after its SET).
func TestFrozenNodeCoalescedOneBatchAtATime(t *testing.T) {
	nodes := harness.Start(t, 5, harness.Config{})
	frozen := nodes[4]
	warmScripts(t, nodes)
	h := &batchHook{sent: map[string][]string{}}
	clients := hookedClients(nodes, 4, h)
	c, err := redlock.New(clients, redlock.WithNodeTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, cl := range clients {
			cl.Close()
		}
	})

	// Every node identified before the freeze (a node first met frozen
	// gets no command: its identity is read first, on its own call).
	ctx := context.Background()
	warm, err := c.TryLock(ctx, "warm", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the warm-up's release on the node to freeze", func() bool {
		keys, err := lockKeys(ctx, frozen)
		return err == nil && len(keys) == 0
	})
	frozen.Freeze()
	defer frozen.Thaw()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for j := 0; j < 10; j++ {
				l, err := c.TryLock(ctx, fmt.Sprintf("k%d.%d", g, j), 10*time.Second)
				if err == nil {
					err = l.Release(ctx)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("with one node of five frozen: %v", err)
	}
	frozen.Thaw()
	c.Close() // every call, late releases included, has returned

	h.mu.Lock()
	defer h.mu.Unlock()
	if h.most != 1 {
		t.Errorf("%d lock calls or pipelines in flight to the frozen node at once, want 1", h.most)
	}
	reached := 0
	for k, cmds := range h.sent {
		if cmds[0] != "set" || k == "warm" {
			continue
		}
		reached++
		if len(cmds) < 2 || cmds[len(cmds)-1] != "evalsha" {
			t.Errorf("key %s: the frozen node was sent %v, want its SET and then a release", k, cmds)
		}
	}
	if reached == 0 {
		t.Error("no acquisition reached the frozen node")
	}
	for i, n := range nodes {
		keys, err := lockKeys(ctx, n)
		if err != nil || len(keys) != 0 {
			t.Errorf("node %d: keys left after every lock was released: %v %v", i, keys, err)
		}
	}
	t.Logf("frozen node: %d keys reached by an acquisition of 160, at most %d in flight", reached, h.most)
}

// warmScripts caches the release script on every node (with a Client of
// its own, closed when its calls have all returned): a release is then one
// EVALSHA.
func warmScripts(t *testing.T, nodes []*harness.Node) {
	t.Helper()
	warm := client(t, nodes)
	if l, err := warm.TryLock(context.Background(), "warm", 10*time.Second); err != nil {
		t.Fatal(err)
	} else if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	warm.Close()
}

// hookedClients returns a client per node as NewFromURLs makes them
// (deadlines reach the socket, no retries: an acquisition is one SET NX),
// with hook h on node i's.
func hookedClients(nodes []*harness.Node, i int, h redis.Hook) []redis.UniversalClient {
	var clients []redis.UniversalClient
	for j, n := range nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.Addr, ContextTimeoutEnabled: true, MaxRetries: -1})
		if j == i {
			cl.AddHook(h)
		}
		clients = append(clients, cl)
	}
	return clients
}

// batchHook records, on one node's client, the commands sent per key
// (alone or in a pipeline) and the most lock calls or pipelines in flight
// at once.
// runID matches a server's run_id (40 hex digits).
var runID = regexp.MustCompile(`^[0-9a-f]{40}$`)

type batchHook struct {
	mu             sync.Mutex
	sent           map[string][]string
	inflight, most int
}

// enter records cmds ("set" for a grant: SET NX or a guarded script) and
// reports whether they are lock commands (SET,
// scripts), which it counts in flight; the identity calls (INFO) go past
// the queue.
func (h *batchHook) enter(cmds []redis.Cmder) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	lock := false
	for _, cmd := range cmds {
		args := cmd.Args()
		switch cmd.Name() {
		case "set":
			h.sent[fmt.Sprint(args[1])] = append(h.sent[fmt.Sprint(args[1])], "set")
			lock = true
		case "evalsha", "eval":
			name := cmd.Name()
			if nk, ok := args[2].(int); ok && len(args) > 3+nk && runID.MatchString(fmt.Sprint(args[3+nk])) {
				name = "set" // a guarded grant script: its first argument is the node's run_id
			}
			h.sent[fmt.Sprint(args[3])] = append(h.sent[fmt.Sprint(args[3])], name)
			lock = true
		}
	}
	if lock {
		h.inflight++
		h.most = max(h.most, h.inflight)
	}
	return lock
}

func (h *batchHook) leave(lock bool) {
	if lock {
		h.mu.Lock()
		h.inflight--
		h.mu.Unlock()
	}
}

func (h *batchHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *batchHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		defer h.leave(h.enter([]redis.Cmder{cmd}))
		return next(ctx, cmd)
	}
}

func (h *batchHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		defer h.leave(h.enter(cmds))
		return next(ctx, cmds)
	}
}
