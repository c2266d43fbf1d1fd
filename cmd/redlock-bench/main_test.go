package main

import (
	"bytes"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(benchWorkerEnv) != "" { // a process of the bench's processes scenario: see processes
		redis.SetLogger(quiet{})
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// nodes starts n redis-server processes for one test.
func nodes(t *testing.T, n int) []string {
	t.Helper()
	nd, err := startNodes(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, x := range nd {
			x.Close()
		}
	})
	return urlsOf(nd)
}
