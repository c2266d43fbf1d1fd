// Command redlock runs the redlock demo, inspects and force-unlocks lock
// keys on a set of Redis nodes and checks nodes against what the
// algorithm needs. The benchmark against go-redsync and others is a
// command of its own, cmd/redlock-bench, so that this one links none of
// the competitors.
//
//	redlock --help            the subcommands, one line each
//	redlock COMMAND --help    a subcommand's flags
//	redlock version           (or --version)
//
// The help text is generated from the command table and each subcommand's
// flag.FlagSet, so it cannot fall behind the flags.
//
// Exit codes: 0 success; 1 failure (demo saw its lock type's guarantee
// broken, inspect found partial or TTL-less locks, doctor found a FAIL);
// 2 usage error (bad flag or URL, unlock without --force); 3 a node is
// unreachable or refused the credentials. inspect and unlock work on the
// nodes that answer: with a quorum of them they name the others on stderr
// and exit as if all had answered; with fewer they report what they
// could and exit 3. unlock of a key that no node holds says so and exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/redis/go-redis/v9"
)

const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitUnreachable = 3
)

// exitError carries an exit code to main.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return &exitError{exitUsage, fmt.Errorf(format, args...)}
}

// runner runs a subcommand once its flags are parsed; pos are the
// positional arguments.
type runner func(pos []string, stdout, stderr io.Writer) error

// command is one subcommand. flags registers its flags on fs and returns
// the runner that reads them: the FlagSet that parses is the one --help
// prints.
type command struct {
	name    string // the words after "redlock"
	args    string // positional arguments, for the synopsis ("" = none allowed)
	summary string // one line for redlock --help
	flags   func(fs *flag.FlagSet) runner
	hidden  bool // not listed: started by redlock itself
}

// commands is the one table of subcommands, in help order.
var commands = []command{
	{name: "demo", summary: "workers contending for one lock (plain, reentrant, rw or semaphore) through a node fault", flags: demoCmd},
	{name: "inspect", args: "PATTERN", summary: "which nodes hold which lock keys", flags: inspectCmd},
	{name: "unlock", args: "KEY", summary: "delete a stuck lock on every node", flags: unlockCmd},
	{name: "doctor", summary: "check the nodes against what the algorithm needs", flags: doctorCmd},
	{name: "version", summary: "the module version of this binary and its Go version (also --version)", flags: versionCmd},
}

const usageFooter = `
Run 'redlock COMMAND --help' for a command's flags.
URLS is a comma-separated list of redis://, rediss:// or unix:// URLs, one per independent node,
given by --nodes; inspect, unlock and doctor also read --nodes-file FILE or $REDLOCK_NODES
(which keep passwords out of argv).
exit codes: 0 ok, 1 failure, 2 usage, 3 node unreachable or bad credentials
(inspect, unlock: 3 only when fewer than a quorum of the nodes answered)
`

// printUsage writes redlock --help: every listed command with its summary.
func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: redlock COMMAND [ARGS] [flags]")
	fmt.Fprintln(w, "\ncommands:")
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	for _, c := range commands {
		if !c.hidden {
			fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
		}
	}
	tw.Flush()
	fmt.Fprint(w, usageFooter)
}

// printHelp writes redlock COMMAND --help: the synopsis and every flag of
// fs (flag.VisitAll), spelled with two dashes as the rest of the help is.
func printHelp(w io.Writer, c *command, fs *flag.FlagSet) {
	syn := "redlock " + c.name
	if c.args != "" {
		syn += " " + c.args
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		syn += " [flags]"
	}
	fmt.Fprintf(w, "usage: %s\n\n%s\n", syn, c.summary)
	first := true
	fs.VisitAll(func(f *flag.Flag) {
		if first {
			fmt.Fprintln(w, "\nflags:")
			first = false
		}
		typ, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if typ != "" {
			line += " " + typ
		}
		fmt.Fprintf(w, "%s\n        %s%s\n", line, usage, defaultNote(f, typ))
	})
}

// defaultNote shows a flag's default unless it is the type's zero value.
func defaultNote(f *flag.Flag, typ string) string {
	switch f.DefValue {
	case "", "0", "false", "0s":
		return ""
	}
	if typ == "string" {
		return fmt.Sprintf(" (default %q)", f.DefValue)
	}
	return " (default " + f.DefValue + ")"
}

func main() {
	// go-redis logs every failed redial of a stopped node to stderr, which
	// would tear through the demo's live view; failures are reported per
	// node by the commands themselves.
	redis.SetLogger(quiet{})
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...interface{}) {}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printUsage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 { // redlock help COMMAND
			return run(append(args[1:len(args):len(args)], "--help"), stdout, stderr)
		}
		printUsage(stdout)
		return exitOK
	case "--version", "-version":
		args = []string{"version"}
	}
	c, rest := lookup(args)
	if c == nil {
		fmt.Fprintf(stderr, "redlock: unknown command %q\n\n", args[0])
		printUsage(stderr)
		return exitUsage
	}
	fs := flag.NewFlagSet("redlock "+c.name, flag.ContinueOnError)
	exec := c.flags(fs)
	pos, err := parse(fs, rest)
	switch {
	case errors.Is(err, flag.ErrHelp):
		printHelp(stdout, c, fs)
		return exitOK
	case err != nil:
		err = usageErr("%v (see redlock %s --help)", err, c.name)
	case c.args == "" && len(pos) > 0:
		err = usageErr("%s takes no arguments, got %q", c.name, pos)
	default:
		err = exec(pos, stdout, stderr)
	}
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "redlock %s: %v\n", c.name, err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitFailure
}

// lookup finds the command args name (the longest match, for commands of
// several words) and returns it with the arguments after its name.
func lookup(args []string) (*command, []string) {
	var best *command
	var rest []string
	for i := range commands {
		words := strings.Fields(commands[i].name)
		if len(words) > len(args) || (best != nil && len(words) <= len(strings.Fields(best.name))) {
			continue
		}
		if slices.Equal(words, args[:len(words)]) {
			best, rest = &commands[i], args[len(words):]
		}
	}
	return best, rest
}

// parse parses flags that may come before or after positional arguments.
// It returns flag.ErrHelp for -h/--help and the flag package's error for a
// bad flag; it prints nothing.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func splitURLs(s string) []string {
	var out []string
	for _, u := range strings.Split(s, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}
