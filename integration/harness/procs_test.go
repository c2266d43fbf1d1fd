package harness

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, IgnoreRedisDial()) }

// A server that answers on a node's port but is not the node's process
// (another test binary took the port first) is told apart by its pid.
func TestOwnServerTellsProcessesApart(t *testing.T) {
	n := Start(t, 1, Config{})[0]
	c := n.Client()
	defer c.Close()
	n.mu.Lock()
	pid := n.cmd.Process.Pid
	n.mu.Unlock()
	ctx := context.Background()
	if err := ownServer(ctx, c, pid); err != nil {
		t.Fatalf("own server: %v", err)
	}
	if err := ownServer(ctx, c, pid+1); !errors.Is(err, errNotOurs) {
		t.Fatalf("other pid: err = %v, want errNotOurs", err)
	}
}
