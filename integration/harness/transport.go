package harness

import (
	"fmt"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/valkey-io/valkey-go"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/goredisconn"
	"github.com/redlock-go/redlock/rueidisconn"
	"github.com/redlock-go/redlock/transport"
	"github.com/redlock-go/redlock/valkeyconn"
)

// Transports are the values of REDLOCK_TRANSPORT: the client library
// NewClient reaches the nodes through.
var Transports = []string{"goredis", "rueidis", "valkey"}

// Transport returns REDLOCK_TRANSPORT, "goredis" when unset.
func Transport() string {
	if v := os.Getenv("REDLOCK_TRANSPORT"); v != "" {
		return v
	}
	return "goredis"
}

// NewClient makes a lock Client over the nodes at urls through the
// transport REDLOCK_TRANSPORT names: go-redis (NewFromURLs), rueidis or
// valkey-go (NewFromConns, with retries and client-side caching off). The
// transports it opens are closed at t's cleanup, after the Client (close
// it in a cleanup registered later, or before).
func NewClient(t testing.TB, urls []string, opts ...redlock.Option) (*redlock.Client, error) {
	t.Helper()
	tr := Transport()
	if tr == "goredis" {
		return redlock.NewFromURLs(urls, opts...)
	}
	conns := make([]transport.Conn, len(urls))
	for i, u := range urls {
		c, closeFn, err := OpenConn(tr, u)
		if err != nil {
			return nil, err
		}
		t.Cleanup(closeFn)
		conns[i] = c
	}
	return redlock.NewFromConns(conns, opts...)
}

// OpenConn opens a transport.Conn of kind tr ("goredis", "rueidis" or
// "valkey") to the node at url, and the func that closes it.
func OpenConn(tr, url string) (transport.Conn, func(), error) {
	switch tr {
	case "rueidis":
		opt, err := rueidis.ParseURL(url)
		if err != nil {
			return nil, nil, err
		}
		opt.DisableCache, opt.DisableRetry = true, true
		c, err := rueidisconn.Open(opt)
		if err != nil {
			return nil, nil, err
		}
		return c, c.Close, nil
	case "valkey":
		opt, err := valkey.ParseURL(url)
		if err != nil {
			return nil, nil, err
		}
		opt.DisableCache, opt.DisableRetry = true, true
		c, err := valkeyconn.Open(opt)
		if err != nil {
			return nil, nil, err
		}
		return c, c.Close, nil
	case "goredis":
		return openGoRedis(url)
	}
	return nil, nil, fmt.Errorf("harness: REDLOCK_TRANSPORT=%q: want one of %v", tr, Transports)
}

// openGoRedis is OpenConn's go-redis transport: the library's own
// adapter, as New makes it, with context deadlines on and retries off.
func openGoRedis(url string) (transport.Conn, func(), error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, nil, err
	}
	opt.ContextTimeoutEnabled, opt.MaxRetries = true, -1
	c := redis.NewClient(opt)
	return goredisconn.New(c), func() { _ = c.Close() }, nil
}
