package redlocktest

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
)

func TestConformance(t *testing.T) {
	Conformance(t, New(t).Env())
}

func TestConformanceFiveNodes(t *testing.T) {
	Conformance(t, New(t, NodeCount(5)).Env())
}

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed bool
	msgs   []string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

// runCheck runs ch against env on a recorder and reports whether it failed.
func runCheck(t *testing.T, ch check, env Env) (bool, []string) {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ch.fn(r, env, "redlocktest:meta:"+ch.name)
	}()
	<-done
	return r.failed, r.msgs
}

// TestConformanceCanFail runs every check against broken envs: each check
// must fail against at least one of them, and pass against the Cluster.
// The checks of bad input and of Release depend on the library alone, not
// on the env: no broken env can fail them.
func TestConformanceCanFail(t *testing.T) {
	broken := map[string]func(c *Cluster) Env{
		"Lose does nothing": func(c *Cluster) Env {
			e := c.Env()
			e.Lose = func(string) {}
			return e
		},
		"Advance does nothing": func(c *Cluster) Env {
			e := c.Env()
			e.Advance = func(time.Duration) {}
			return e
		},
		"Advance moves only the nodes": func(c *Cluster) Env {
			e := c.Env()
			e.Advance = func(d time.Duration) { c.setNodeTime(c.Now().Add(d)) }
			return e
		},
		"each Client on nodes of its own": func(c *Cluster) Env {
			e := c.Env()
			e.Client = func(opts ...redlock.Option) *redlock.Client { return New(t).Client(opts...) }
			return e
		},
		"Client drops its options": func(c *Cluster) Env {
			e := c.Env()
			e.Client = func(...redlock.Option) *redlock.Client { return c.Client() }
			return e
		},
	}
	libraryOnly := map[string]bool{"InvalidInputBeforeTraffic": true, "ReleaseFreesKey": true, "ReleaseTwiceNotHeld": true}
	defer func(d time.Duration) { doneWait = d }(doneWait)
	doneWait = time.Second // a broken env never closes Done: do not wait long
	for _, ch := range checks {
		t.Run(ch.name, func(t *testing.T) {
			if failed, msgs := runCheck(t, ch, New(t).Env()); failed {
				t.Fatalf("fails against the Cluster: %v", msgs)
			}
			var caught []string
			for name, mk := range broken {
				if failed, _ := runCheck(t, ch, mk(New(t))); failed {
					caught = append(caught, name)
				}
			}
			if len(caught) == 0 && !libraryOnly[ch.name] {
				t.Fatalf("passes against every broken env")
			}
			t.Logf("fails against: %v", caught)
		})
	}
}
