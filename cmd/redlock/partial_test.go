package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// startKillable starts n redis-server processes and returns them with
// their URLs; the test may Close one early (Close is idempotent here).
func startKillable(t *testing.T, n int) ([]localNode, []string) {
	t.Helper()
	nd, kind, err := startNodes(n, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(kind, "redis-server") {
		t.Skipf("needs redis-server on PATH, have %s", kind)
	}
	closed := make([]bool, n)
	t.Cleanup(func() {
		for i, x := range nd {
			if !closed[i] {
				x.Close()
			}
		}
	})
	kill := make([]localNode, n)
	for i := range nd {
		kill[i] = &onceNode{localNode: nd[i], closed: &closed[i]}
	}
	return kill, urlsOf(nd)
}

type onceNode struct {
	localNode
	closed *bool
}

func (o *onceNode) Close() {
	if !*o.closed {
		*o.closed = true
		o.localNode.Close()
	}
}

func setOn(t *testing.T, url, key, val string, ttl time.Duration) {
	t.Helper()
	opt, _ := redis.ParseURL(url)
	c := redis.NewClient(opt)
	defer c.Close()
	if err := c.Set(context.Background(), key, val, ttl).Err(); err != nil {
		t.Fatal(err)
	}
}

// One node of three down: inspect and unlock work on the two that answer
// (a quorum), name the missing node on stderr and exit 0; the JSON shows
// the node as missing. With two of three down they still report what the
// one node holds, but exit 3.
func TestInspectAndUnlockWithANodeDown(t *testing.T) {
	nd, urls := startKillable(t, 3)
	for _, u := range urls {
		setOn(t, u, "lock:a", "client/1:owner-a", time.Minute)
	}
	setOn(t, urls[1], "lock:b", "client/1:owner-b", time.Minute)
	nd[2].Close()
	all := strings.Join(urls, ",")
	down := maskAll(urls[2:])[0]

	code, out, errOut := runCmd(t, "inspect", "lock:*", "--nodes", all)
	if code != exitOK || !strings.Contains(out, "lock:a") || !strings.Contains(out, "##?") || !strings.Contains(out, "UNKNOWN") ||
		!strings.Contains(errOut, "1 of 3 nodes not reached") || !strings.Contains(errOut, down) || !strings.Contains(errOut, "connection refused") {
		t.Fatalf("inspect, one node down: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = runCmd(t, "inspect", "lock:*", "--json", "--nodes", all)
	var reports []KeyReport
	if err := json.Unmarshal([]byte(out), &reports); err != nil || code != exitOK || len(reports) != 2 {
		t.Fatalf("inspect --json: exit %d, %v\n%s", code, err, out)
	}
	if r := reports[0]; !r.QuorumHeld || r.Held != 2 || r.PerNode[2].Missing == "" || r.PerNode[0].Missing != "" {
		t.Errorf("lock:a with node 3 down: %+v", r)
	}
	if r := reports[1]; r.Partial || !r.Unknown { // 1 seen + 1 missing makes the quorum 2: not a sure leftover
		t.Errorf("lock:b with node 3 down: %+v", r)
	}

	code, out, errOut = runCmd(t, "unlock", "lock:a", "--force", "--nodes", all)
	if code != exitOK || !strings.Contains(out, "deleted lock:a on 2 of 3 nodes") || !strings.Contains(out, down+": not reached") ||
		!strings.Contains(errOut, "run unlock again when they are back") {
		t.Fatalf("unlock --force, one node down: exit %d\n%s\n%s", code, out, errOut)
	}

	nd[1].Close()
	code, out, errOut = runCmd(t, "inspect", "lock:*", "--nodes", all)
	if code != exitUnreachable || !strings.Contains(out, "no matching keys") || !strings.Contains(errOut, "only 1 of 3 nodes answered") {
		t.Fatalf("inspect, two nodes down: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "unlock", "lock:b", "--force", "--nodes", all)
	if code != exitUnreachable || !strings.Contains(out, "held on none of the 1 nodes that answered") {
		t.Fatalf("unlock, two nodes down: exit %d\n%s\n%s", code, out, errOut)
	}
	nd[0].Close()
	code, _, errOut = runCmd(t, "inspect", "lock:*", "--nodes", all)
	if code != exitUnreachable || !strings.Contains(errOut, "no node answered") {
		t.Fatalf("inspect, all nodes down: exit %d\n%s", code, errOut)
	}
}

// The node URLs can come from $REDLOCK_NODES or --nodes-file instead of
// argv; --nodes and --nodes-file together are a usage error.
func TestNodesFromEnvAndFile(t *testing.T) {
	_, urls := startKillable(t, 3)
	setOn(t, urls[0], "lock:env", "client/1:x", 0)
	file := filepath.Join(t.TempDir(), "nodes")
	if err := os.WriteFile(file, []byte("# the lock nodes\n"+urls[0]+",\n"+urls[1]+"\n\n"+urls[2]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(nodesEnv, strings.Join(urls, ","))
	code, out, errOut := runCmd(t, "inspect", "lock:*")
	if code != exitFailure || !strings.Contains(out, "lock:env") || !strings.Contains(out, "1/3") {
		t.Errorf("inspect from $%s: exit %d\n%s\n%s", nodesEnv, code, out, errOut)
	}
	t.Setenv(nodesEnv, "")
	code, out, errOut = runCmd(t, "unlock", "lock:env", "--nodes-file", file)
	if code != exitUsage || !strings.Contains(out, "would delete lock:env") || !strings.Contains(out, "no ttl") || strings.Contains(out, "-1ns") {
		t.Errorf("unlock --nodes-file: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, args := range [][]string{
		{"inspect", "x*", "--nodes", urls[0], "--nodes-file", file},
		{"inspect", "x*", "--nodes-file", filepath.Join(t.TempDir(), "absent")},
		{"doctor", "--nodes-file", filepath.Join(t.TempDir(), "absent")},
		{"unlock", "k"},
	} {
		if code, _, errOut := runCmd(t, args...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d\n%s", args, code, exitUsage, errOut)
		}
	}
}

// inspect --json with no match prints [] (not null); unlock of a key no
// node holds says so and exits 0, with or without --force.
func TestNoMatch(t *testing.T) {
	_, urls := startKillable(t, 3)
	all := strings.Join(urls, ",")
	code, out, _ := runCmd(t, "inspect", "nothing:*", "--json", "--nodes", all)
	if code != exitOK || strings.TrimSpace(out) != "[]" {
		t.Errorf("inspect --json, no match: exit %d, %q", code, out)
	}
	for _, args := range [][]string{{"unlock", "nothing", "--nodes", all}, {"unlock", "nothing", "--force", "--nodes", all}} {
		code, out, errOut := runCmd(t, args...)
		if code != exitOK || !strings.Contains(out, "nothing is held on none of the 3 nodes that answered: nothing to delete") {
			t.Errorf("%q: exit %d\n%s\n%s", args, code, out, errOut)
		}
	}
}
