package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startRedis starts n redis-server processes without persistence and
// returns their URLs; they stop when the test ends.
func startRedis(t *testing.T, n int) []string {
	t.Helper()
	var urls []string
	for i := 0; i < n; i++ {
		port := freePort(t)
		cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
		if err := cmd.Start(); err != nil {
			t.Fatalf("redis-server (apt-get install redis-server): %v", err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		c := redis.NewClient(&redis.Options{Addr: addr})
		waitFor(t, "redis-server "+addr, func() error { return c.Ping(context.Background()).Err() })
		c.Close()
		urls = append(urls, "redis://"+addr)
	}
	return urls
}

// startPostgres initializes a cluster in a temporary directory, starts
// PostgreSQL on a free port (as user postgres when run as root, which
// initdb refuses) and returns a pool; it stops when the test ends.
func startPostgres(t *testing.T) *pgxpool.Pool {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		t.Fatal("PostgreSQL not installed (apt-get install postgresql)")
	}
	bin := filepath.Dir(bins[len(bins)-1])
	dir, err := os.MkdirTemp("", "stock-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	asUser := func(name string, args ...string) *exec.Cmd { return exec.Command(filepath.Join(bin, name), args...) }
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root needs the postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		asUser = func(name string, args ...string) *exec.Cmd {
			return exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(bin, name)}, args...)...)
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := asUser("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	port := freePort(t)
	srv := asUser("postgres", "-D", data, "-p", strconv.Itoa(port), "-k", dir, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// runuser does not pass signals on: stop the server itself.
		if out, err := asUser("pg_ctl", "stop", "-D", data, "-m", "immediate").CombinedOutput(); err != nil {
			t.Logf("pg_ctl stop: %v\n%s", err, out)
			_ = srv.Process.Kill()
		}
		_ = srv.Wait()
	})
	db, err := pgxpool.New(context.Background(), fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres", port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	waitFor(t, "postgres", func() error { return db.Ping(context.Background()) })
	return db
}

func waitFor(t *testing.T, what string, ready func() error) {
	t.Helper()
	var err error
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if err = ready(); err == nil {
			return
		}
	}
	t.Fatalf("%s not ready: %v", what, err)
}
