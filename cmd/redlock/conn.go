package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/nodeurl"
)

// connect parses every URL (exit 2 on a bad one) and pings every node
// (exit 3 naming the unreachable ones or bad credentials).
func connect(urls []string) ([]*redis.Client, error) {
	if len(urls) == 0 {
		return nil, usageErr("--nodes is required: a comma-separated list of redis:// URLs")
	}
	var clients []*redis.Client
	for _, u := range urls {
		opt, err := nodeurl.Parse(u)
		if err != nil {
			closeAll(clients)
			return nil, usageErr("bad node URL %v", err)
		}
		opt.ContextTimeoutEnabled = true
		opt.DialTimeout = 2 * time.Second
		opt.MaxRetries = -1
		clients = append(clients, redis.NewClient(opt))
	}
	var bad []string
	for i, c := range clients {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: %s", nodeurl.Mask(urls[i]), explain(err)))
		}
	}
	if len(bad) > 0 {
		closeAll(clients)
		return nil, &exitError{exitUnreachable, fmt.Errorf("nodes not usable:\n  %s", strings.Join(bad, "\n  "))}
	}
	return clients, nil
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
		_ = c.Close()
	}
}

// maskAll returns the URLs to show, their passwords masked.
func maskAll(urls []string) []string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = nodeurl.Mask(u)
	}
	return out
}
