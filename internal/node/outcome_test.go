package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestMayHaveRun(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"timeout", context.DeadlineExceeded, true},
		{"read timeout", &net.OpError{Op: "read", Net: "tcp", Err: ioTimeout{}}, true},
		{"reset after write", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true},
		{"EOF", io.EOF, true},
		{"unknown", errors.New("something else"), true},
		{"error reply", redisError("WRONGPASS invalid username-password pair"), false},
		{"NOAUTH", fmt.Errorf("wrapped: %w", redisError("NOAUTH Authentication required.")), false},
		{"refused dial", dial, false},
		{"DNS", &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "nohost.invalid"}}, false},
		{"client closed", redis.ErrClosed, false},
		{"pool timeout", redis.ErrPoolTimeout, false},
		{"not RESP", errors.New(`redis: can't parse "HTTP/1.1 400 Bad Request"`), false},
	}
	n := &Node{}
	for _, tc := range cases {
		if got := n.MayHaveRun(tc.err); got != tc.want {
			t.Errorf("%s: MayHaveRun(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
	// A client that retries reports only its last try's error; an earlier
	// try may have run.
	retrying := &Node{retries: true}
	if !retrying.MayHaveRun(dial) || !retrying.MayHaveRun(redisError("NOAUTH")) {
		t.Error("a retrying client's failed call must count as possibly run")
	}
	if n.MayHaveRun(nil) || retrying.MayHaveRun(nil) {
		t.Error("a call that succeeded did not fail")
	}
}

type ioTimeout struct{}

func (ioTimeout) Error() string { return "i/o timeout" }
func (ioTimeout) Timeout() bool { return true }

type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

func TestServers(t *testing.T) {
	same := [][2]string{
		{"localhost:7001", "127.0.0.1:7001"},
		{"[::1]:7001", "127.0.0.1:7001"},
		{"0.0.0.0:7001", "localhost:7001"},
		{"Host.Example:7001", "host.example:7001"},
		{"host.example", "host.example:6379"},
	}
	for _, p := range same {
		a := Servers(redis.NewClient(&redis.Options{Addr: p[0]}))
		b := Servers(redis.NewClient(&redis.Options{Addr: p[1], DB: 3}))
		if a[0] != b[0] {
			t.Errorf("%s and %s: %v vs %v, want one server", p[0], p[1], a, b)
		}
	}
	if a, b := Servers(redis.NewClient(&redis.Options{Addr: "127.0.0.2:7001"})), Servers(redis.NewClient(&redis.Options{Addr: "127.0.0.1:7001"})); a[0] == b[0] {
		t.Errorf("127.0.0.2 and 127.0.0.1 folded into %v", a)
	}
	cl := Servers(redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"localhost:7001", "10.0.0.1:7002"}}))
	if len(cl) != 2 || cl[0] != "localhost:7001" {
		t.Errorf("cluster seeds = %v", cl)
	}
}
