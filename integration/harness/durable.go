package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// DurableServer returns a server executable that has WAITAOF (Redis 7.2+,
// Valkey 8.0+), for the tests of durable votes: $DURABLE_SERVER, else
// $REDIS_SERVER or redis-server if new enough, else valkey-server on PATH
// (make durable installs Valkey 8.0 from Debian's bookworm-backports).
// With none it skips the test, or fails it when $DURABLE_REQUIRE is set
// (make durable, CI).
func DurableServer(t testing.TB) string {
	t.Helper()
	cands := []string{os.Getenv("DURABLE_SERVER")}
	if p, err := ServerPath(); err == nil {
		cands = append(cands, p)
	}
	if p, err := exec.LookPath("valkey-server"); err == nil {
		cands = append(cands, p)
	}
	for _, c := range cands {
		if c != "" && HasWAITAOF(c) {
			return c
		}
	}
	msg := "no server with WAITAOF (Redis 7.2+, Valkey 8.0+): set DURABLE_SERVER, or run make durable, which installs valkey-server"
	if os.Getenv("DURABLE_REQUIRE") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// DurableConfig is the node configuration of the durable-votes tests on
// DurableServer: appendonly yes, and on Valkey appendfsync everysec with hz
// 100 (Valkey fsyncs for a waiting WAITAOF on its cron, about every 1/hz);
// on Redis appendfsync always, since Redis (7.2 to 8.0) under everysec
// lets WAITAOF wait for its once-a-second fsync, longer than a node's
// deadline.
func DurableConfig(t testing.TB) Config {
	t.Helper()
	bin := DurableServer(t)
	out, _ := exec.Command(bin, "--version").Output()
	if strings.HasPrefix(string(out), "Valkey") {
		return Config{Persist: true, Fsync: "everysec", Bin: bin, Args: []string{"--hz", "100"}}
	}
	return Config{Persist: true, Fsync: "always", Bin: bin}
}

// DurableEverysec is DurableConfig with appendfsync everysec (hz 100) on
// every server, for tests whose node deadlines allow Redis's wait of up to
// a second.
func DurableEverysec(t testing.TB) Config {
	t.Helper()
	return Config{Persist: true, Fsync: "everysec", Bin: DurableServer(t), Args: []string{"--hz", "100"}}
}

var versionRE = regexp.MustCompile(`v=(\d+)\.(\d+)`)

// HasWAITAOF reports whether the executable bin is a server with WAITAOF,
// from what --version says: Redis 7.2 or later, Valkey 8.0 or later (Valkey
// 7.2 has it too).
func HasWAITAOF(bin string) bool {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return false
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return false
	}
	major, _ := strconv.Atoi(string(m[1]))
	minor, _ := strconv.Atoi(string(m[2]))
	return major > 7 || major == 7 && minor >= 2
}

// Wipe deletes the node's data directory's files (its append-only file):
// a node killed and wiped comes up empty, as after a lost disk.
func (n *Node) Wipe() error {
	ents, err := os.ReadDir(n.dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Name() == "redis.log" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(n.dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
