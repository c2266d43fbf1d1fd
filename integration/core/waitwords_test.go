package core

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/integration/harness"
)

// A Lock that cannot reach a quorum because one node is in restart
// quarantine and two are down says so in its "still waiting" line and in
// its error: the quarantined node as quarantined, the dead ones as
// unreachable, and the two healthy nodes that the lost round did not wait
// for as that, not as nodes that gave no answer.
func TestWaitWordsTellNodesApart(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&syncWriter{w: &buf, mu: &mu}, nil))
	nodes := harness.Start(t, 5, harness.Config{})
	c := client(t, nodes, redlock.WithLogger(logger), redlock.WithNodeTimeout(50*time.Millisecond))
	ctx := context.Background()
	warm, err := c.TryLock(ctx, "warm", time.Second) // knows every node's process
	if err != nil {
		t.Fatal(err)
	}
	_ = warm.Release(ctx)
	if err := nodes[0].Restart(); err != nil {
		t.Fatal(err)
	}
	nodes[1].Kill()
	nodes[2].Kill()
	wait, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	_, err = c.Lock(wait, "k", time.Second)
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		t.Fatalf("Lock with one node quarantined and two down: %v, want a QuorumError", err)
	}
	mu.Lock()
	log := buf.String()
	mu.Unlock()
	var line string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "still waiting") {
			line = l
		}
	}
	if !strings.Contains(line, "too few nodes can vote") || !strings.Contains(line, "unreachable=2") || !strings.Contains(line, "not_counted=1") {
		t.Errorf("the still-waiting line does not tell the nodes apart: %q\nlog:\n%s", line, log)
	}
	msg := err.Error()
	for _, want := range []string{
		nodes[0].Addr + ": restarted recently: quarantined",
		"2 of 5 nodes unreachable, 1 not counted",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q: %s", want, msg)
		}
	}
	for _, n := range nodes[1:3] {
		if !strings.Contains(msg, n.Addr) || strings.Contains(msg, "no answer yet") {
			t.Errorf("error does not name %s as refused: %s", n.Addr, msg)
		}
	}
	if !strings.Contains(msg, "connection refused") {
		t.Errorf("error does not say the dead nodes refuse connections: %s", msg)
	}
}
