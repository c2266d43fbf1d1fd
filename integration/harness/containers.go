package harness

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Container is one Redis node in a Docker container on a private network,
// reachable from the host through its published port. Faults go through
// the Docker client (kill, pause, network disconnect). Methods are safe
// for concurrent use.
type Container struct {
	ID    string
	Alias string
	ctr   *testcontainers.DockerContainer
	cli   *testcontainers.DockerClient
	netID string

	mu       sync.Mutex
	addr     string
	paused   bool
	down     bool
	detached bool
}

// DockerAvailable reports whether a Docker engine answers.
func DockerAvailable(ctx context.Context) error {
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = cli.Ping(ctx, client.PingOptions{})
	return err
}

// StartContainers starts n Redis containers on a new private network with
// the image from EnsureImage. Every container, the network and the Docker
// client are removed when the test ends, also when it fails. The caller
// must have set TESTCONTAINERS_RYUK_DISABLED=true (the reaper image cannot
// be pulled here).
func StartContainers(t testing.TB, n int, cfg Config) []*Container {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		t.Fatalf("harness: docker client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	img, err := EnsureImage(ctx, cli, 20*time.Second, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	nw, err := network.New(ctx)
	testcontainers.CleanupNetwork(t, nw)
	if err != nil {
		t.Fatalf("harness: network: %v", err)
	}
	args := []string{"redis-server", "--port", "6379", "--protected-mode", "no", "--save", "", "--dir", "/data"}
	if cfg.Persist {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	out := make([]*Container, n)
	for i := range out {
		alias := fmt.Sprintf("redis%d", i+1)
		ctr, err := testcontainers.Run(ctx, img,
			testcontainers.WithExposedPorts("6379/tcp"),
			testcontainers.WithCmd(args...),
			network.WithNetwork([]string{alias}, nw),
			testcontainers.WithWaitStrategy(wait.ForLog("Ready to accept connections").WithStartupTimeout(30*time.Second)),
		)
		testcontainers.CleanupContainer(t, ctr)
		if err != nil {
			t.Fatalf("harness: start container %s (%s): %v", alias, img, err)
		}
		c := &Container{ID: ctr.GetContainerID(), Alias: alias, ctr: ctr, cli: cli, netID: nw.ID}
		if err := c.refresh(ctx); err != nil {
			t.Fatal(err)
		}
		out[i] = c
	}
	return out
}

func (c *Container) refresh(ctx context.Context) error {
	port, err := c.ctr.MappedPort(ctx, "6379/tcp")
	if err != nil {
		return fmt.Errorf("harness: %s port: %w", c.Alias, err)
	}
	// The daemon's host as testcontainers sees it; inside a container that
	// shares the engine's network namespace that guess (the default
	// gateway) is wrong, so fall back to loopback.
	hosts := []string{"127.0.0.1"}
	if h, err := c.ctr.Host(ctx); err == nil && h != "" {
		hosts = append([]string{h}, hosts...)
	}
	for _, h := range hosts {
		a := net.JoinHostPort(h, port.Port())
		c.mu.Lock()
		c.addr = a
		c.mu.Unlock()
		if conn, err := net.DialTimeout("tcp", a, 300*time.Millisecond); err == nil {
			_ = conn.Close()
			break
		}
	}
	return c.waitReady(ctx)
}

func (c *Container) waitReady(ctx context.Context) error {
	rc := redis.NewClient(&redis.Options{Addr: c.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer rc.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		err := rc.Ping(pctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("harness: container %s not ready: %w", c.Alias, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Addr is the published host:port (it may change after a restart).
func (c *Container) Addr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addr
}

func bg() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// Kill sends SIGKILL (docker kill); the container stays down until Up.
func (c *Container) Kill() error {
	ctx, cancel := bg()
	defer cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused {
		_, _ = c.cli.ContainerUnpause(ctx, c.ID, client.ContainerUnpauseOptions{})
		c.paused = false
	}
	_, err := c.cli.ContainerKill(ctx, c.ID, client.ContainerKillOptions{Signal: "KILL"})
	if err == nil {
		c.down = true
	}
	return err
}

// Up starts a killed container again (docker start) and waits for PING.
func (c *Container) Up() error {
	c.mu.Lock()
	down := c.down
	c.mu.Unlock()
	if !down {
		return nil
	}
	ctx, cancel := bg()
	defer cancel()
	if _, err := c.cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		return err
	}
	c.mu.Lock()
	c.down = false
	c.mu.Unlock()
	return c.refresh(ctx)
}

// Restart kills and starts the container at once. Without persistence
// the node has forgotten every key.
func (c *Container) Restart() error {
	if err := c.Kill(); err != nil {
		return err
	}
	return c.Up()
}

// Freeze pauses the container (cgroup freezer, like SIGSTOP).
func (c *Container) Freeze() error {
	ctx, cancel := bg()
	defer cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.paused || c.down {
		return nil
	}
	_, err := c.cli.ContainerPause(ctx, c.ID, client.ContainerPauseOptions{})
	if err == nil {
		c.paused = true
	}
	return err
}

// Thaw resumes a paused container.
func (c *Container) Thaw() error {
	ctx, cancel := bg()
	defer cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.paused {
		return nil
	}
	_, err := c.cli.ContainerUnpause(ctx, c.ID, client.ContainerUnpauseOptions{})
	if err == nil {
		c.paused = false
	}
	return err
}

// Isolate disconnects the container from its network (docker network
// disconnect): no client reaches it.
func (c *Container) Isolate() error {
	ctx, cancel := bg()
	defer cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.detached {
		return nil
	}
	_, err := c.cli.NetworkDisconnect(ctx, c.netID, client.NetworkDisconnectOptions{Container: c.ID, Force: true})
	if err == nil {
		c.detached = true
	}
	return err
}

// Rejoin reconnects an isolated container and brings a killed one up.
func (c *Container) Rejoin() error {
	ctx, cancel := bg()
	defer cancel()
	c.mu.Lock()
	detached := c.detached
	c.mu.Unlock()
	if detached {
		if _, err := c.cli.NetworkConnect(ctx, c.netID, client.NetworkConnectOptions{Container: c.ID}); err != nil {
			return err
		}
		c.mu.Lock()
		c.detached = false
		c.mu.Unlock()
		if err := c.refresh(ctx); err != nil {
			return err
		}
	}
	return c.Up()
}
