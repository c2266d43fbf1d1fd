// Command redlock-bench benchmarks the redlock library against go-redsync,
// bsm/redislock and rueidislock, side by side on the same redis-server
// processes it starts, and writes results.json, results.md and PNG plots.
//
//	redlock-bench [flags]           the benchmark (--quick: about a minute)
//	redlock-bench --help            its flags
//	redlock-bench worker [flags]    one process of the processes scenario (started by the bench itself)
//
// It is a module of its own so that the redlock command and the library
// do not link the competitors or the plotting code.
//
// Exit codes: 0 success; 1 failure; 2 usage error (bad flag).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
)

const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
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

// runner runs a command once its flags are parsed; pos are the positional
// arguments.
type runner func(pos []string, stdout, stderr io.Writer) error

// command is the bench itself or its hidden worker.
type command struct {
	name    string // "redlock-bench" or "redlock-bench worker"
	summary string
	flags   func(fs *flag.FlagSet) runner
}

var (
	benchCommand  = command{name: "redlock-bench", summary: "this library vs go-redsync and others, side by side", flags: benchCmd}
	workerCommand = command{name: "redlock-bench worker", summary: "one process of the bench's processes scenario (started by the bench)", flags: benchWorkerCmd}
)

func main() {
	redis.SetLogger(quiet{}) // failed redials of a stopped node are counted, not logged
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...interface{}) {}

// run runs the bench (or, with "worker" first, one worker process) and
// returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	c := &benchCommand
	if len(args) > 0 && args[0] == "worker" {
		c, args = &workerCommand, args[1:]
	}
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	exec := c.flags(fs)
	pos, err := parse(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		printHelp(stdout, c, fs)
		return exitOK
	case err != nil:
		err = usageErr("%v (see %s --help)", err, c.name)
	case len(pos) > 0:
		err = usageErr("%s takes no arguments, got %q", c.name, pos)
	default:
		err = exec(pos, stdout, stderr)
	}
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "%s: %v\n", c.name, err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitFailure
}

// printHelp writes the synopsis and every flag of fs, spelled with two
// dashes.
func printHelp(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s [flags]\n\n%s\n\nflags:\n", c.name, c.summary)
	fs.VisitAll(func(f *flag.Flag) {
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

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, u := range strings.Split(s, ",") {
		if u = strings.TrimSpace(u); u != "" {
			out = append(out, u)
		}
	}
	return out
}
