package main

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// Both spellings print one line naming this binary's build: from a test
// binary the module version is "(devel)"; the Go version is the running one.
func TestVersionCommand(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		code, out, errOut := runCmd(t, arg)
		if code != exitOK || errOut != "" {
			t.Fatalf("redlock %s: exit %d, stderr %q", arg, code, errOut)
		}
		if !strings.HasPrefix(out, "redlock ") || !strings.HasSuffix(out, ", "+runtime.Version()+"\n") ||
			strings.Count(out, "\n") != 1 {
			t.Errorf("redlock %s: %q, want one line \"redlock VERSION..., %s\"", arg, out, runtime.Version())
		}
	}
}

func TestVersionLine(t *testing.T) {
	lib := func(version string, replace *debug.Module) *debug.Module {
		return &debug.Module{Path: libraryPath, Version: version, Replace: replace}
	}
	other := &debug.Module{Path: "github.com/redis/go-redis/v9", Version: "v9.23.0"}
	cases := []struct {
		name string
		info *debug.BuildInfo
		ok   bool
		want string
	}{
		{"go install @v0.1.0", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Version: "v0.1.0"}, Deps: []*debug.Module{other, lib("v0.1.0", nil)}},
			true, "redlock v0.1.0, library v0.1.0, go1.26.8"},
		{"checkout", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Version: "(devel)"}, Deps: []*debug.Module{lib("(devel)", nil)}},
			true, "redlock (devel), library (devel), go1.26.8"},
		{"library replaced", &debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Version: "v0.1.0"}, Deps: []*debug.Module{lib("v0.1.0", &debug.Module{Path: "../..", Version: ""})}},
			true, "redlock v0.1.0, library (devel), go1.26.8"},
		{"no library dependency", &debug.BuildInfo{GoVersion: "go1.26.8", Deps: []*debug.Module{other}},
			true, "redlock (devel), go1.26.8"},
		{"no build info", nil, false, "redlock unknown (no build info)"},
	}
	for _, tc := range cases {
		if got := versionLine(tc.info, tc.ok); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
