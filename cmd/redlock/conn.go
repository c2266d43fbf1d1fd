package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/admin"
)

// nodesEnv names the environment variable that lists the nodes when
// neither --nodes nor --nodes-file is given: URLs with passwords stay out
// of argv, and so out of ps and shell history.
const nodesEnv = "REDLOCK_NODES"

// nodeSource is where a command reads its node URLs from: --nodes,
// --nodes-file or $REDLOCK_NODES, in that order.
type nodeSource struct {
	list *string
	file *string
}

// nodeFlags registers --nodes and --nodes-file on fs.
func nodeFlags(fs *flag.FlagSet) nodeSource {
	return nodeSource{
		list: fs.String("nodes", "", "comma-separated redis:// `URLS`, one per node (or --nodes-file, or $"+nodesEnv+")"),
		file: fs.String("nodes-file", "", "read the node URLs from `FILE`: comma- or newline-separated, '#' starts a comment line; keeps passwords out of argv"),
	}
}

// urls returns the node URLs as given (unparsed). Both flags at once, an
// unreadable file or no URLs at all is a usage error; nothing is sent.
func (s nodeSource) urls() ([]string, error) {
	var urls []string
	switch {
	case *s.list != "" && *s.file != "":
		return nil, usageErr("--nodes and --nodes-file exclude each other")
	case *s.list != "":
		urls = splitURLs(*s.list)
	case *s.file != "":
		b, err := os.ReadFile(*s.file)
		if err != nil {
			return nil, usageErr("--nodes-file: %v", err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				urls = append(urls, splitURLs(line)...)
			}
		}
		if len(urls) == 0 {
			return nil, usageErr("--nodes-file %s lists no node URL", *s.file)
		}
	default:
		urls = splitURLs(os.Getenv(nodesEnv))
	}
	if len(urls) == 0 {
		return nil, usageErr("--nodes is required (or --nodes-file, or $%s): a comma-separated list of redis:// URLs", nodesEnv)
	}
	return urls, nil
}

// nodeSet is the nodes a command works on. clients[i] is nil when node i
// could not be used; missing[i] then says why.
type nodeSet struct {
	shown   []string // the URLs to show, passwords masked
	clients []*redis.Client
	missing []string
}

// answered is the number of usable nodes.
func (s *nodeSet) answered() int {
	n := 0
	for _, c := range s.clients {
		if c != nil {
			n++
		}
	}
	return n
}

// drop takes node i out of the set (it failed mid-way) with the reason.
func (s *nodeSet) drop(i int, err error) {
	if s.clients[i] != nil {
		_ = s.clients[i].Close()
		s.clients[i] = nil
	}
	s.missing[i] = explain(err)
}

// missingLines is one "URL: reason" per node left out, in node order.
func (s *nodeSet) missingLines() []string {
	var out []string
	for i, m := range s.missing {
		if s.clients[i] == nil {
			out = append(out, s.shown[i]+": "+m)
		}
	}
	return out
}

func (s *nodeSet) close() { closeAll(s.clients) }

// connectSome parses every URL (exit 2 on a bad one, before any traffic)
// and pings every node at once. Nodes that do not answer or refuse the
// credentials are left out of the set, each with its reason: the caller
// decides whether the rest are enough.
func connectSome(urls []string) (*nodeSet, error) {
	s := &nodeSet{shown: maskAll(urls), clients: make([]*redis.Client, len(urls)), missing: make([]string, len(urls))}
	for i, u := range urls {
		opt, err := parseURL(u)
		if err != nil {
			s.close()
			return nil, err
		}
		opt.ContextTimeoutEnabled = true
		opt.DialTimeout = 2 * time.Second
		opt.MaxRetries = -1
		s.clients[i] = redis.NewClient(opt)
	}
	errs := make([]error, len(urls))
	var wg sync.WaitGroup
	for i, c := range s.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			errs[i] = c.Ping(ctx).Err()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			s.drop(i, err)
		}
	}
	return s, nil
}

// connect is connectSome for commands that need every node: any node
// left out is an error (exit 3) naming each with its reason.
func connect(urls []string) ([]*redis.Client, error) {
	if len(urls) == 0 {
		return nil, usageErr("--nodes is required: a comma-separated list of redis:// URLs")
	}
	s, err := connectSome(urls)
	if err != nil {
		return nil, err
	}
	if bad := s.missingLines(); len(bad) > 0 {
		s.close()
		return nil, &exitError{exitUnreachable, fmt.Errorf("nodes not usable:\n  %s", strings.Join(bad, "\n  "))}
	}
	return s.clients, nil
}

func pingAll(urls []string) error {
	cs, err := connect(urls)
	closeAll(cs)
	return err
}

func explain(err error) string {
	s := err.Error()
	switch {
	case strings.Contains(s, "WRONGPASS"), strings.Contains(s, "NOAUTH"), strings.Contains(s, "invalid password"):
		return "authentication failed (" + s + ")"
	case strings.Contains(s, "connection refused"):
		return "unreachable: connection refused"
	case strings.Contains(s, "deadline exceeded"), strings.Contains(s, "timeout"):
		return "unreachable: no answer within 2s"
	}
	return s
}

func closeAll(cs []*redis.Client) {
	for _, c := range cs {
		if c != nil {
			_ = c.Close()
		}
	}
}

// parseURL parses a node URL as NewFromURLs does; a bad one is a usage
// error (exit 2) naming what is wrong, its password masked.
func parseURL(u string) (*redis.Options, error) {
	o, err := admin.ParseURL(u)
	var ue *admin.URLError
	if errors.As(err, &ue) {
		return nil, usageErr("bad node URL %v", ue.Err)
	}
	return o, err
}

// maskAll returns the URLs to show, their passwords masked.
func maskAll(urls []string) []string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = admin.MaskURL(u)
	}
	return out
}
