package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// Sentinel is a sentinel process (redis-server --sentinel) that monitors
// one master.
type Sentinel struct {
	*Server
	MasterName string
}

// StartSentinel starts a sentinel that monitors master under name with a
// quorum of 1, and waits until it has reached the master and reports it as
// such (SENTINEL MASTER: flags and role-reported "master", and
// SENTINEL GET-MASTER-ADDR-BY-NAME gives its address). It is stopped when
// the test ends.
func StartSentinel(t testing.TB, name string, master *Node) *Sentinel {
	t.Helper()
	s := startServerT(t, serverSpec{ports: 1, args: func(dir string, p []int) ([]string, error) {
		// A sentinel rewrites its config file, so it must be a file
		// of its own; the monitor line can only be given there.
		conf := filepath.Join(dir, "sentinel.conf")
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"+
			"sentinel monitor %s 127.0.0.1 %d 1\n"+
			"sentinel down-after-milliseconds %s 60000\n",
			p[0], dir, filepath.Join(dir, "redis.log"), name, master.Port, name)
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			return nil, err
		}
		return []string{conf, "--sentinel"}, nil
	}})
	c := s.Client()
	defer c.Close()
	err := waitFor("sentinel "+s.Addr, func(ctx context.Context) error {
		m, err := c.Do(ctx, "sentinel", "master", name).Result()
		if err != nil {
			return err
		}
		f := fields(m)
		if f["flags"] != "master" || f["role-reported"] != "master" {
			return fmt.Errorf("SENTINEL MASTER %s: flags %q, role-reported %q", name, f["flags"], f["role-reported"])
		}
		addr, err := c.Do(ctx, "sentinel", "get-master-addr-by-name", name).StringSlice()
		if err != nil {
			return err
		}
		if want := []string{"127.0.0.1", strconv.Itoa(master.Port)}; len(addr) != 2 || addr[0] != want[0] || addr[1] != want[1] {
			return fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME %s = %q, want %q", name, addr, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return &Sentinel{Server: s, MasterName: name}
}

// fields reads a reply of field/value pairs: a RESP2 flat array or a RESP3
// map.
func fields(v interface{}) map[string]string {
	f := map[string]string{}
	switch v := v.(type) {
	case []interface{}:
		for i := 0; i+1 < len(v); i += 2 {
			f[fmt.Sprint(v[i])] = fmt.Sprint(v[i+1])
		}
	case map[interface{}]interface{}:
		for k, x := range v {
			f[fmt.Sprint(k)] = fmt.Sprint(x)
		}
	}
	return f
}
