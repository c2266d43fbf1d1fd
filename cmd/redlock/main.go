// Command redlock runs the redlock demo, inspects and force-unlocks lock
// keys on a set of Redis nodes, and benchmarks the library against
// go-redsync.
//
//	redlock demo [--nodes URLS | --embedded] [--workers 8] [--duration 8s] [--metrics-addr ADDR]
//	redlock inspect PATTERN --nodes URLS [--json]
//	redlock unlock KEY --force --nodes URLS
//	redlock doctor --nodes URLS [--node-timeout 50ms] [--ttl 10s] [--drift-factor 0.01] [--samples 20] [--window 2s] [--quorum K] [--json]
//	redlock bench [--quick] [--repeat N] [--only LIST] [--out DIR]
//	redlock version (or --version)
//
// Exit codes: 0 success; 1 failure (demo saw an overlap, inspect found
// partial or TTL-less locks, doctor found a FAIL, bench failed); 2 usage
// error (bad flag or URL); 3 a node is unreachable or refused the
// credentials.
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

const usage = `usage:
  redlock demo [--nodes URLS | --embedded] [--workers N] [--duration D] [--metrics-addr ADDR]
                                                             workers contending through a node fault
  redlock inspect PATTERN --nodes URLS [--json]              which nodes hold which lock keys
  redlock unlock KEY --force --nodes URLS                    delete a stuck lock on every node
  redlock doctor --nodes URLS [--node-timeout D] [--ttl D] [--drift-factor F] [--samples N] [--window D] [--quorum K] [--json]
                                                             check the nodes against what the algorithm needs
  redlock bench [--quick] [--repeat N] [--only LIST] [--out DIR]
                                                             this library vs go-redsync, side by side
  redlock version (or --version)                             the module version of this binary and its Go version

URLS is a comma-separated list of redis:// or rediss:// URLs, one per independent node.
exit codes: 0 ok, 1 failure, 2 usage, 3 node unreachable or bad credentials
`

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
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	var err error
	switch args[0] {
	case "demo":
		err = cmdDemo(args[1:], stdout)
	case "inspect":
		err = cmdInspect(args[1:], stdout)
	case "unlock":
		err = cmdUnlock(args[1:], stdout)
	case "doctor":
		err = cmdDoctor(args[1:], stdout)
	case "bench":
		err = cmdBench(args[1:], stdout, stderr)
	case "version", "--version":
		cmdVersion(stdout)
		return exitOK
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "redlock: unknown command %q\n%s", args[0], usage)
		return exitUsage
	}
	if err == nil {
		return exitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return exitUsage
	}
	fmt.Fprintf(stderr, "redlock %s: %v\n", args[0], err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitFailure
}

// parse parses flags that may come before or after positional arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, usageErr("%s", usage)
			}
			return nil, usageErr("%v", err)
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
