package node

import (
	"errors"
	"os"
	"testing"
	"time"
)

func TestParseInfoCaptured(t *testing.T) {
	b, err := os.ReadFile("testdata/info-7.0.15.txt") // redis-server 7.0.15, INFO server persistence replication
	if err != nil {
		t.Fatal(err)
	}
	id, err := ParseInfo(string(b))
	if err != nil {
		t.Fatal(err)
	}
	want := Identity{RunID: "d884d71141d342ee2f08a21360108c716197339d", Uptime: 4 * time.Second, Role: "master", Version: "7.0.15"}
	if id != want {
		t.Errorf("ParseInfo = %+v, want %+v", id, want)
	}
	if id.Durable() {
		t.Error("a node without AOF is durable")
	}
}

func TestParseInfoFields(t *testing.T) {
	id, err := ParseInfo("# Server\nrun_id:abc\nuptime_in_seconds:42\n# Persistence\naof_enabled:1\nappendfsync:always\n# Replication\nrole:slave\n")
	if err != nil {
		t.Fatal(err)
	}
	if id.RunID != "abc" || id.Uptime != 42*time.Second || id.Role != "slave" || !id.Durable() {
		t.Errorf("ParseInfo = %+v", id)
	}
	if id.Promoted {
		t.Errorf("no second_repl_offset: Promoted")
	}
	for off, want := range map[string]bool{"-1": false, "1234": true} {
		if id, _ := ParseInfo("run_id:x\nrole:master\nsecond_repl_offset:" + off + "\n"); id.Promoted != want {
			t.Errorf("second_repl_offset:%s: Promoted %v, want %v", off, id.Promoted, want)
		}
	}
	if _, err := ParseInfo("# Server\nuptime_in_seconds:1\n"); !errors.Is(err, ErrNoRunID) {
		t.Errorf("no run_id: err %v", err)
	}
	if _, err := ParseInfo("run_id:x\nuptime_in_seconds:soon\n"); err == nil {
		t.Error("bad uptime accepted")
	}
}
