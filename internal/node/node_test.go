package node

import (
	"errors"
	"net"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestSlot(t *testing.T) {
	// Values from the Redis Cluster specification's test vectors.
	cases := map[string]int{"123456789": 12739, "foo": 12182, "{user1000}.following": 3443, "{user1000}.followers": 3443, "": 0}
	for k, want := range cases {
		if got := Slot(k); got != want {
			t.Errorf("Slot(%q) = %d, want %d", k, got, want)
		}
	}
}

func TestAddrAndContextSupport(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "10.0.0.1:6379", DB: 2})
	defer c.Close()
	if Addr(c) != "10.0.0.1:6379/2" || HonorsContext(c) {
		t.Errorf("Addr %q honors %v", Addr(c), HonorsContext(c))
	}
	c2 := redis.NewClient(&redis.Options{Addr: "h:1", ContextTimeoutEnabled: true})
	defer c2.Close()
	if Addr(c2) != "h:1" || !HonorsContext(c2) {
		t.Errorf("Addr %q honors %v", Addr(c2), HonorsContext(c2))
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"b:1", "a:1"}})
	defer cc.Close()
	if Addr(cc) != "cluster:a:1,b:1" {
		t.Errorf("cluster Addr %q", Addr(cc))
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string { return "i/o timeout" }
func (timeoutErr) Timeout() bool { return true }

func TestIsTimeout(t *testing.T) {
	var ne net.Error = &net.OpError{Op: "read", Err: timeoutErr{}}
	if !IsTimeout(ne) || IsTimeout(errors.New("x")) || IsTimeout(nil) {
		t.Fatal("IsTimeout")
	}
}

func TestMayRetry(t *testing.T) {
	cases := []struct {
		name string
		c    redis.UniversalClient
		want bool
	}{
		{"default retries", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), true},
		{"retries off", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1}), false},
		{"cluster default redirects", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}), true},
		{"cluster all off", redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, MaxRetries: -1, MaxRedirects: -1}), false},
	}
	for _, tc := range cases {
		if got := MayRetry(tc.c); got != tc.want {
			t.Errorf("%s: MayRetry = %v, want %v", tc.name, got, tc.want)
		}
		_ = tc.c.Close()
	}
}
