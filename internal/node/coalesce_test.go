package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// frozen is a server that reads everything and never answers (but the
// handshake): a frozen node. got holds what it received.
type frozen struct {
	ln  net.Listener
	mu  sync.Mutex
	got bytes.Buffer
	wg  sync.WaitGroup
}

func newFrozen(t *testing.T) *frozen {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &frozen{ln: ln}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				defer c.Close()
				b := make([]byte, 4096)
				for {
					k, err := c.Read(b)
					if bytes.Contains(b[:k], []byte("hello")) { // the connection's handshake: refused, go-redis goes on
						_, _ = c.Write([]byte("-ERR unknown command 'hello'\r\n"))
						continue
					}
					f.mu.Lock()
					f.got.Write(b[:k])
					f.mu.Unlock()
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return f
}

func (f *frozen) received() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.got.String()
}

// inFlight sends a lock call to n with timeout d and returns once it is in
// flight; its error comes on the channel.
func inFlight(n *Node, d time.Duration) <-chan error {
	first := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		_, err := n.Do(ctx, LockNew([]string{"first"}, "v", time.Minute))
		first <- err
	}()
	for {
		n.co.mu.Lock()
		r := n.co.running
		n.co.mu.Unlock()
		if r {
			return first
		}
		time.Sleep(time.Millisecond)
	}
}

// frozenNode returns a frozen server and a coalescing Node on a client of
// it, with the Node's Tracker.
func frozenNode(t *testing.T) (*frozen, *redis.Client, *Node, *sync.WaitGroup) {
	f := newFrozen(t)
	c := redis.NewClient(&redis.Options{Addr: f.ln.Addr().String(), ContextTimeoutEnabled: true, MaxRetries: -1,
		Protocol: 2, DisableIdentity: true})
	track := new(sync.WaitGroup)
	n := New(c, track)
	n.Coalesce(true)
	return f, c, n, track
}

// queue sends cmd(0..7) to n from 8 goroutines at once, each with a 50 ms
// deadline, and returns their errors.
func queue(n *Node, cmd func(i int) *Cmd) []error {
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			_, errs[i] = n.Do(ctx, cmd(i))
		}(i)
	}
	wg.Wait()
	return errs
}

// Calls queued behind a call in flight to a frozen node return by their
// own deadlines, were never written, and say so (MayHaveRun false); the
// call in flight may have run.
func TestCoalesceQueuedCallsNotSent(t *testing.T) {
	f, c, n, track := frozenNode(t)
	if !n.coalesce {
		t.Fatal("a *redis.Client node does not coalesce")
	}
	first := inFlight(n, 500*time.Millisecond)
	errs := queue(n, func(i int) *Cmd { return LockNew([]string{fmt.Sprintf("queued%d", i)}, "v", time.Minute) })
	for i, err := range errs {
		if !NotSent(err) || n.MayHaveRun(err) || !IsTimeout(err) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("queued call %d: %v (not sent %v, may have run %v)", i, err, NotSent(err), n.MayHaveRun(err))
		}
	}
	err := <-first
	if err == nil || NotSent(err) || !n.MayHaveRun(err) {
		t.Errorf("call in flight: %v", err)
	}
	track.Wait()
	_ = c.Close()
	_ = f.ln.Close()
	f.wg.Wait()
	got := f.received()
	if !bytes.Contains([]byte(got), []byte("first")) || bytes.Contains([]byte(got), []byte("queued")) {
		t.Errorf("the frozen node received %q", got)
	}
	n.co.mu.Lock()
	defer n.co.mu.Unlock()
	if n.co.running || len(n.co.queue) != 0 {
		t.Errorf("coalescer left running %v with %d queued", n.co.running, len(n.co.queue))
	}
}

// A release still queued at its caller's deadline is sent late, once the
// call in flight returns, with the time its caller gave it; its caller's
// error says it may have run. (Dropped, it would leave the key until its
// TTL.)
func TestCoalesceQueuedReleasesSentLate(t *testing.T) {
	f, c, n, track := frozenNode(t)
	first := inFlight(n, 300*time.Millisecond)
	errs := queue(n, func(i int) *Cmd { return Release([]string{fmt.Sprintf("rel%d", i)}, "v", false) })
	for i, err := range errs {
		if NotSent(err) || !n.MayHaveRun(err) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("release %d: %v (not sent %v, may have run %v)", i, err, NotSent(err), n.MayHaveRun(err))
		}
	}
	n.co.mu.Lock()
	if n.co.late != len(errs) || len(n.co.queue) != len(errs) {
		t.Errorf("%d late of %d queued, want %d", n.co.late, len(n.co.queue), len(errs))
	}
	n.co.mu.Unlock()
	<-first
	track.Wait() // the late batch timed out on the frozen node after its budget
	_ = c.Close()
	_ = f.ln.Close()
	f.wg.Wait()
	got := f.received()
	for i := range errs {
		if !bytes.Contains([]byte(got), []byte(fmt.Sprintf("rel%d", i))) {
			t.Errorf("release rel%d never reached the node; it received %q", i, got)
		}
	}
	n.co.mu.Lock()
	defer n.co.mu.Unlock()
	if n.co.running || len(n.co.queue) != 0 || n.co.late != 0 {
		t.Errorf("coalescer left running %v with %d queued, %d late", n.co.running, len(n.co.queue), n.co.late)
	}
}

// Cluster and ring clients do not coalesce.
func TestCoalesceOnlyPlainClients(t *testing.T) {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"a:1"}})
	defer cc.Close()
	n := New(cc, nil)
	n.Coalesce(true)
	if n.coalesce {
		t.Error("cluster client coalesces")
	}
}

// counter is a go-redis hook that counts the EVAL commands a client sends
// alone and in pipelines.
type counter struct {
	mu              sync.Mutex
	alone, piped, n int // EVALs sent alone, in pipelines; pipelines with one
}

func (h *counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "eval" {
			h.mu.Lock()
			h.alone++
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}
func (h *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		k := 0
		for _, c := range cmds {
			if c.Name() == "eval" {
				k++
			}
		}
		h.mu.Lock()
		h.piped += k
		if k > 0 {
			h.n++
		}
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

// Late releases that the node refuses for not knowing their script (after
// a restart) go out again as EVAL in one pipeline, not one round trip each.
func TestCoalesceLateNoScriptOnePipeline(t *testing.T) {
	a := newAnswering(t)
	c := redis.NewClient(&redis.Options{Addr: a.ln.Addr().String(), ContextTimeoutEnabled: true,
		MaxRetries: -1, Protocol: 2, DisableIdentity: true})
	h := &counter{}
	c.AddHook(h)
	track := new(sync.WaitGroup)
	n := New(c, track)
	n.Coalesce(true)
	inflight := inFlight(n, 10*time.Second)
	errs := queue(n, func(i int) *Cmd { return Release([]string{fmt.Sprintf("noscript%d", i)}, "v", false) })
	for i, err := range errs {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("release %d: %v, want its caller gone at its deadline", i, err)
		}
	}
	close(a.gate)
	<-inflight
	track.Wait()
	_ = c.Close()
	_ = a.ln.Close()
	a.wg.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.alone != 0 || h.piped != len(errs) || h.n != 1 {
		t.Errorf("EVALs sent alone %d, in pipelines %d (%d pipelines); want all %d in one", h.alone, h.piped, h.n, len(errs))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range errs {
		if k := a.got[fmt.Sprintf("eval noscript%d", i)]; k != 1 {
			t.Errorf("EVAL of noscript%d received %d times, want 1", i, k)
		}
	}
}
