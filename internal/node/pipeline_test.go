package node

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// answering is a fake node that answers every command by its key (see
// answer), and the call on key "first" only once gate is closed. It counts
// the commands it receives, by name and key.
type answering struct {
	ln   net.Listener
	gate chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	got  map[string]int // "evalsha ok1": times received
	// waitaof is the reply to WAITAOF, when set (under mu); else WAITAOF
	// is refused like any command outside SET and the scripts. "hang":
	// no reply.
	waitaof string
	waitArg string // the timeout of the last WAITAOF received (under mu)
}

func newAnswering(t *testing.T) *answering {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &answering{ln: ln, gate: make(chan struct{}), got: map[string]int{}}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			a.wg.Add(1)
			go func() {
				defer a.wg.Done()
				defer c.Close()
				a.serve(c)
			}()
		}
	}()
	return a
}

// serve reads commands (RESP arrays of bulk strings) from c and answers
// them in order.
func (a *answering) serve(c net.Conn) {
	r := bufio.NewReader(c)
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		name, key := strings.ToLower(args[0]), ""
		switch {
		case name == "set" && len(args) > 1:
			key = args[1]
		case (name == "evalsha" || name == "eval") && len(args) > 3:
			key = args[3]
		}
		a.mu.Lock()
		a.got[name+" "+key]++
		a.mu.Unlock()
		if key == "first" {
			<-a.gate
		}
		reply := answer(name, key)
		if reply == ":1\r\n" && name == "evalsha" && args[1] == extendManyGrant.script.Hash() {
			reply = manyYes(args[2]) // ExtendMany: a yes per lock (single-key locks)
		}
		a.mu.Lock()
		if name == "waitaof" && len(args) == 4 {
			a.waitArg = args[3]
		}
		if name == "waitaof" && a.waitaof != "" {
			reply = a.waitaof
		}
		a.mu.Unlock()
		if reply == "hang" {
			continue
		}
		if _, err := io.WriteString(c, reply); err != nil {
			return
		}
	}
}

// answer is the fake node's reply: to keys "noperm..." a permission error,
// "noscript..." NOSCRIPT to EVALSHA, "nil..." a refused SET NX, "no..." a
// script's 0, else yes. A command outside SET and the scripts is refused
// as by the minimal ACL user of docs/deployment.md.
func answer(name, key string) string {
	switch {
	case name == "hello":
		return "-ERR unknown command 'hello'\r\n"
	case name != "set" && name != "evalsha" && name != "eval":
		return "-NOPERM this user has no permissions to run the '" + name + "' command\r\n"
	case strings.HasPrefix(key, "noperm"):
		return "-NOPERM this user has no permissions to run the '" + name + "' command\r\n"
	case strings.HasPrefix(key, "noscript") && name == "evalsha":
		return "-NOSCRIPT No matching script. Please use EVAL.\r\n"
	case strings.HasPrefix(key, "nil"):
		return "$-1\r\n"
	case strings.HasPrefix(key, "no") && !strings.HasPrefix(key, "noscript"):
		return ":0\r\n"
	case name == "set":
		return "+OK\r\n"
	}
	return ":1\r\n"
}

// manyYes is ExtendMany's reply of yes to numkeys single-key locks.
func manyYes(numkeys string) string {
	k, _ := strconv.Atoi(numkeys)
	return "*" + numkeys + "\r\n" + strings.Repeat(":1\r\n", k)
}

// readCommand reads one RESP array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	k, err := readLen(r, '*')
	if err != nil {
		return nil, err
	}
	args := make([]string, k)
	for i := range args {
		m, err := readLen(r, '$')
		if err != nil {
			return nil, err
		}
		b := make([]byte, m+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		args[i] = string(b[:m])
	}
	return args, nil
}

func readLen(r *bufio.Reader, kind byte) (int, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 3 || line[0] != kind {
		return 0, fmt.Errorf("want %c, got %q", kind, line)
	}
	return strconv.Atoi(strings.TrimSuffix(line[1:], "\r\n"))
}

// A batch keeps every command's own reply whatever the others get: its
// first command's error reply (NOPERM, NOSCRIPT) is not set on the others,
// which go-redis does to a pipeline's commands by default; an error in the
// middle stays its command's own; a NOSCRIPT is sent again as EVAL by its
// caller only. No command but the callers' reaches the node.
func TestCoalesceBatchKeepsEachReply(t *testing.T) {
	for _, first := range []string{"noperm0", "noscript0", "nil0"} {
		t.Run(first, func(t *testing.T) {
			a := newAnswering(t)
			c := redis.NewClient(&redis.Options{Addr: a.ln.Addr().String(), ContextTimeoutEnabled: true,
				MaxRetries: -1, Protocol: 2, DisableIdentity: true})
			track := new(sync.WaitGroup)
			n := New(c, track)
			n.Coalesce(true)
			defer func() {
				track.Wait()
				_ = c.Close()
				_ = a.ln.Close()
				a.wg.Wait()
			}()
			inflight := inFlight(n, 10*time.Second)
			calls := []batchCall{
				firstCall(first),
				{Release([]string{"ok1"}, "v", false), "yes"},
				{LockNew([]string{"ok2"}, "v", time.Minute), "yes"},
				{LockNew([]string{"nil3"}, "v", time.Minute), "no"},
				{Release([]string{"no4"}, "v", false), "no"},
				{Release([]string{"noperm5"}, "v", false), "NOPERM"},
				{Release([]string{"noscript6"}, "v", false), "yes"},
				{Lock([]string{"ok7"}, "v", time.Minute), "yes"},
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
				waitQueued(n, i+1) // queued in this order: one batch, first is calls[0]
			}
			close(a.gate)
			wg.Wait()
			if err := <-inflight; err != nil {
				t.Errorf("call in flight: %v", err)
			}
			for i, call := range calls {
				if !strings.HasPrefix(got[i], call.want) {
					t.Errorf("call %d (%v): %q, want %s", i, call.cmd.args[:4], got[i], call.want)
				}
			}
			a.checkSent(t)
		})
	}
}

// batchCall is a call of a test batch and its outcome: "yes", "no" or
// its error's prefix.
type batchCall struct {
	cmd  *Cmd
	want string
}

// firstCall is the batch's first call, on key first: NOPERM, yes after
// NOSCRIPT (sent again as EVAL), or a refused SET NX.
func firstCall(first string) batchCall {
	switch first {
	case "noperm0":
		return batchCall{Release([]string{first}, "v", false), "NOPERM"}
	case "noscript0":
		return batchCall{Release([]string{first}, "v", false), "yes"}
	}
	return batchCall{LockNew([]string{first}, "v", time.Minute), "no"}
}

// waitQueued returns once n's queue holds k calls.
func waitQueued(n *Node, k int) {
	for {
		n.co.mu.Lock()
		q := len(n.co.queue)
		n.co.mu.Unlock()
		if q >= k {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// checkSent checks that the node received each command once, but EVALSHA
// twice (the batch's, then its caller's again) and EVAL once for a script
// it did not know, and nothing else.
func (a *answering) checkSent(t *testing.T) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for cmd, k := range a.got {
		want := 1
		switch {
		case strings.HasPrefix(cmd, "hello"):
			continue
		case strings.HasPrefix(cmd, "evalsha noscript"):
			want = 2
		case !strings.HasPrefix(cmd, "set ") && !strings.HasPrefix(cmd, "eval"):
			want = 0
		}
		if k != want {
			t.Errorf("the node received %q %d times, want %d", cmd, k, want)
		}
	}
}
