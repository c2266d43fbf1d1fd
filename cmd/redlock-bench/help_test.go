package main

import (
	"flag"
	"strings"
	"testing"
)

// Every flag of the bench and its worker appears in --help once, with its
// text and at most one default: a flag whose usage text names its default
// has a zero default value, so the help does not show two.
func TestHelpListsEveryFlag(t *testing.T) {
	for _, c := range []*command{&benchCommand, &workerCommand} {
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		c.flags(fs)
		args := append(strings.Fields(c.name)[1:], "--help")
		code, out, errOut := runCmd(t, args...)
		if code != exitOK || errOut != "" {
			t.Errorf("%s --help: exit %d, stderr %q; want 0 and help on stdout", c.name, code, errOut)
		}
		if !strings.Contains(out, "usage: "+c.name) || !strings.Contains(out, c.summary) {
			t.Errorf("%s --help lacks its synopsis or summary:\n%s", c.name, out)
		}
		fs.VisitAll(func(f *flag.Flag) {
			i := strings.Index(out, "\n  --"+f.Name+" ")
			if i < 0 {
				i = strings.Index(out, "\n  --"+f.Name+"\n")
			}
			if i < 0 {
				t.Errorf("%s --help lacks --%s:\n%s", c.name, f.Name, out)
				return
			}
			entry := out[i+1:]
			if j := strings.Index(entry, "\n  --"); j >= 0 {
				entry = entry[:j]
			}
			if n := strings.Count(entry, "default"); n > 1 {
				t.Errorf("%s --help shows %d defaults for --%s:\n%s", c.name, n, f.Name, entry)
			}
		})
	}
}
