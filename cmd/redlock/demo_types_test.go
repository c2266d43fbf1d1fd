package main

import (
	"strings"
	"testing"
)

// Each lock type's demo (plain as without --type) runs through the node fault and its guard sees no
// violation. Figures are not judged: a loaded machine acquires less.
func TestDemoTypes(t *testing.T) {
	for _, tc := range []struct {
		typ  string
		args []string
		want []string
	}{
		{"plain", nil, []string{`contend for "redlock:demo" (TTL`, "overlaps:         0 (two workers inside at once)"}},
		{"reentrant", nil, []string{"as a reentrant lock", "second entries:", "violations:       0 (a second hold inside while one is)"}},
		{"rw", nil, []string{"as a read-write lock", "reads / writes:", "violations:       0 (a writer beside a reader or another writer)"}},
		{"semaphore", []string{"--permits", "2"}, []string{"as a semaphore of 2 permits", "most inside:", "of 2 permits",
			"violations:       0 (more than 2 holders, or two on one permit)"}},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			args := append([]string{"demo", "--type", tc.typ, "--duration", "3s", "--workers", "4"}, tc.args...)
			code, out, errOut := runCmd(t, args...)
			if code != exitOK {
				t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
			}
			for _, want := range append(tc.want, "node 3", "stopped", "back", "acquisitions:") {
				if !strings.Contains(out, want) {
					t.Errorf("demo output lacks %q:\n%s", want, out)
				}
			}
			if tc.typ != "plain" && (strings.Contains(out, "overlaps:") || !strings.Contains(out, `"redlock:demo:`+tc.typ+`" as a`)) {
				t.Errorf("a %s demo reports plain overlaps or lacks its key and type:\n%s", tc.typ, out)
			}
		})
	}
}

// The guard flags what each type forbids, and only that.
func TestDemoGuard(t *testing.T) {
	g := newGuard("rw", 0)
	g.enter(true, "k")
	g.enter(true, "k")
	if v, _, most := g.counts(); v != 0 || most != 2 {
		t.Fatalf("two readers: %d violations, %d readers at most", v, most)
	}
	g.enter(false, "k")
	if v, _, _ := g.counts(); v != 1 {
		t.Fatalf("a writer beside readers: %d violations, want 1", v)
	}
	s := newGuard("semaphore", 2)
	s.enter(false, "p0")
	s.enter(false, "p1")
	if v, _, _ := s.counts(); v != 0 {
		t.Fatalf("2 holders of 2 permits: %d violations", v)
	}
	s.enter(false, "p2")
	s.exit(false, "p2")
	s.enter(false, "p1")
	if v, most, _ := s.counts(); v != 2 || most != 3 {
		t.Fatalf("a third holder, then two on one permit: %d violations (want 2), %d at most", v, most)
	}
}

// Bad type flags are usage errors, refused before any node starts.
func TestDemoTypeFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--type", "mutex"}, `--type "mutex": want one of plain, reentrant, rw, semaphore`},
		{[]string{"--type", "semaphore", "--permits", "0"}, "--permits 0: must be at least 1"},
		{[]string{"--type", "semaphore", "--permits", "-2"}, "--permits -2: must be at least 1"},
		{[]string{"--permits", "2"}, "--permits is for --type semaphore, not plain"},
		{[]string{"--type", "rw", "--permits", "3"}, "--permits is for --type semaphore, not rw"},
	} {
		code, out, errOut := runCmd(t, append([]string{"demo"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("demo %q: exit %d, stdout %q, stderr %q; want exit %d with %q and nothing started", tc.args, code, out, errOut, exitUsage, tc.want)
		}
	}
}
