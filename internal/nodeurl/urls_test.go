package nodeurl

import (
	"strings"
	"testing"
)

func TestMask(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"redis://h:1", "redis://h:1"},
		{"redis://:secret@h:1/0", "redis://:xxxxx@h:1/0"},
		{"redis://user:secret@h:1", "redis://user:xxxxx@h:1"},
		{"rediss://h:1?password=secret&db=2", "rediss://h:1?db=2&password=xxxxx"},
		{"redis://:sec%zzret@h:1", "redis://:xxxxx@h:1"}, // net/url refuses the escape
		{"::bad", "(unparsable URL)"},
	} {
		if got := Mask(tc.in); got != tc.want {
			t.Errorf("Mask(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"redis://", "no host"},
		{"redis:///0", "no host"},
		{"rediss://:secret@/3", "no host"},
		{"redis://:secret@h:99999", "port 99999 is not in 1-65535"},
		{"redis://h:0", "port 0 is not in 1-65535"},
		{"redis://:secret@h:port", "invalid port"},
		{"redis://:sec%zzret@h:1", "invalid URL escape"},
		{"redis://h:1?password=secret&bogus=1", "bogus"},
		{"unix://", "no socket path"},
		{"http://:secret@h:1", `scheme "http"`},
	} {
		_, err := Parse(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", tc.in, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "zzret") {
			t.Errorf("Parse(%q) shows the password: %v", tc.in, err)
		}
	}
	o, err := Parse("redis://u:pw@10.0.0.1:7000/3")
	if err != nil || o.Addr != "10.0.0.1:7000" || o.Username != "u" || o.Password != "pw" || o.DB != 3 {
		t.Fatalf("Parse: %+v, %v", o, err)
	}
	if o, err := Parse("unix:///tmp/r.sock"); err != nil || o.Network != "unix" || o.Addr != "/tmp/r.sock" {
		t.Fatalf("Parse unix: %+v, %v", o, err)
	}
}
