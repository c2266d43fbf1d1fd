package main

import (
	"flag"
	"strings"
	"testing"
)

// Every flag a subcommand registers appears in its --help, spelled as it
// is parsed; the FlagSets are the ones the commands parse with, so a flag
// added without help text cannot pass unnoticed.
func TestHelpListsEveryFlag(t *testing.T) {
	for i := range commands {
		c := &commands[i]
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		c.flags(fs)
		args := append(strings.Fields(c.name), "--help")
		code, out, errOut := runCmd(t, args...)
		if code != exitOK || errOut != "" {
			t.Errorf("redlock %s: exit %d, stderr %q; want 0 and help on stdout", strings.Join(args, " "), code, errOut)
		}
		if !strings.Contains(out, "usage: redlock "+c.name) || !strings.Contains(out, c.summary) {
			t.Errorf("redlock %s --help lacks its synopsis or summary:\n%s", c.name, out)
		}
		n := 0
		fs.VisitAll(func(f *flag.Flag) {
			n++
			if !strings.Contains(out, "\n  --"+f.Name+" ") && !strings.Contains(out, "\n  --"+f.Name+"\n") {
				t.Errorf("redlock %s --help lacks --%s:\n%s", c.name, f.Name, out)
			}
			if !strings.Contains(out, f.Usage[:min(len(f.Usage), 12)]) {
				t.Errorf("redlock %s --help lacks the text of --%s (%q)", c.name, f.Name, f.Usage)
			}
		})
		if c.name != "version" && n == 0 {
			t.Errorf("redlock %s registers no flags: the test would pass vacuously", c.name)
		}
	}
}

// redlock --help names every listed subcommand with its summary, and a
// hidden one not at all.
func TestHelpListsEveryCommand(t *testing.T) {
	for _, arg := range []string{"--help", "-h", "help"} {
		code, out, errOut := runCmd(t, arg)
		if code != exitOK || errOut != "" {
			t.Fatalf("redlock %s: exit %d, stderr %q", arg, code, errOut)
		}
		for _, c := range commands {
			line := "\n  " + c.name + " "
			switch {
			case c.hidden && strings.Contains(out, line):
				t.Errorf("redlock %s lists the hidden %q", arg, c.name)
			case !c.hidden && (!strings.Contains(out, line) || !strings.Contains(out, c.summary)):
				t.Errorf("redlock %s lacks %q (%s):\n%s", arg, c.name, c.summary, out)
			}
		}
	}
	// No arguments: the same list on stderr, as a usage error.
	code, _, errOut := runCmd(t)
	if code != exitUsage || !strings.Contains(errOut, "\n  doctor ") {
		t.Errorf("redlock: exit %d, stderr %q", code, errOut)
	}
}

// redlock help COMMAND is COMMAND --help; a positional argument to a
// command that takes none is a usage error.
func TestHelpCommandAndStrayArgs(t *testing.T) {
	code, out, _ := runCmd(t, "help", "doctor")
	if code != exitOK || !strings.Contains(out, "--drift-factor") {
		t.Errorf("redlock help doctor: exit %d\n%s", code, out)
	}
	code, _, errOut := runCmd(t, "doctor", "extra")
	if code != exitUsage || !strings.Contains(errOut, "takes no arguments") {
		t.Errorf("redlock doctor extra: exit %d, stderr %q", code, errOut)
	}
}
