package core

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/admin"
	"github.com/redlock-go/redlock/integration/harness"
)

// The value a lock stores on the nodes names the Client that wrote it
// (its instance id, name first), and every log line of that Client carries
// the same id: a lock found on a node leads to the process and its logs.
func TestOwnerNamesTheClient(t *testing.T) {
	nodes := harness.Start(t, 3, harness.Config{})
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(&syncWriter{&buf, &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := client(t, nodes, redlock.WithName("pod-7"), redlock.WithLogger(logger))
	if !strings.HasPrefix(c.ID(), "pod-7/") {
		t.Fatalf("ID %q lacks the name", c.ID())
	}
	ctx := context.Background()
	l, err := c.TryLock(ctx, "order:42", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// TryLock returned at quorum: a node whose SET is still on its way
	// holds nothing yet; every node that holds the key holds our owner.
	vals, _ := raw(t, nodes, "order:42")
	held := 0
	for i, v := range vals {
		if v == "" {
			continue
		}
		held++
		client, attempt := admin.SplitOwner(v)
		if v != l.Owner() || client != c.ID() || len(attempt) != 22 {
			t.Fatalf("node %d holds %q; want the owner %q, of client %q with a 128-bit attempt part", i, v, l.Owner(), c.ID())
		}
	}
	if held < c.Quorum() {
		t.Fatalf("owner on %d nodes (%q), quorum %d", held, vals, c.Quorum())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c.Close()
	mu.Lock()
	defer mu.Unlock()
	msgs := map[string]bool{}
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var rec struct {
			Msg    string `json:"msg"`
			Client string `json:"client"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec.Client != c.ID() {
			t.Fatalf("log line %q does not carry the client id %q", line, c.ID())
		}
		msgs[rec.Msg] = true
	}
	for _, want := range []string{"redlock: client ready", "redlock: acquired", "redlock: released"} {
		if !msgs[want] {
			t.Errorf("no %q line carrying the client id; got %v", want, msgs)
		}
	}
}
