package localredis

import (
	"os/exec"
	"strings"
	"testing"
)

// Started servers answer INFO on their own port, a frozen one does not
// until healed, and Close leaves nothing running.
func TestStartN(t *testing.T) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server not on PATH")
	}
	servers, err := StartN(bin, []string{"--appendonly", "yes"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, s := range servers {
			s.Close()
		}
	}()
	if servers[0].Addr() == servers[1].Addr() || !strings.HasPrefix(servers[0].URL(), "redis://127.0.0.1:") {
		t.Fatalf("addresses %s %s, URL %s", servers[0].Addr(), servers[1].Addr(), servers[0].URL())
	}
	if err := servers[0].Fault(); err != nil {
		t.Fatal(err)
	}
	if _, err := serverInfo(servers[0].Addr()); err == nil {
		t.Error("a frozen server answered")
	}
	if err := servers[0].Heal(); err != nil {
		t.Fatal(err)
	}
	info, err := serverInfo(servers[0].Addr())
	if err != nil || !strings.Contains(info, "redis_version:") {
		t.Fatalf("INFO after Heal: %q, %v", info, err)
	}
}
