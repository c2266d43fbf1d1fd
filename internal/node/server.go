package node

import (
	"fmt"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Servers names the servers client sends to, one name per server, for the
// check that no server casts two votes: the database number is left out
// (two databases are one server), and the names that reach this host's
// loopback interface (localhost, 127.0.0.1, ::1, 0.0.0.0, ::, no host) are
// folded into one. Other loopback addresses (127.0.0.2) are kept apart: a
// server may bind one of them only. A cluster or ring client names every
// seed address. Clients whose target cannot be read (sentinel failover
// clients, unknown types) are named by identity.
func Servers(c redis.UniversalClient) []string {
	switch c := c.(type) {
	case *redis.Client:
		o := c.Options()
		switch {
		case o.Addr == "FailoverClient":
		case o.Network == "unix":
			return []string{"unix:" + o.Addr}
		default:
			return []string{canonical(o.Addr)}
		}
	case *redis.ClusterClient:
		return canonicalAll(c.Options().Addrs)
	case *redis.Ring:
		var a []string
		for _, v := range c.Options().Addrs {
			a = append(a, v)
		}
		return canonicalAll(a)
	}
	return []string{fmt.Sprintf("%T@%p", c, c)}
}

func canonicalAll(addrs []string) []string {
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = canonical(a)
	}
	return s
}

// canonical folds the spellings of one TCP server into one name.
func canonical(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = addr, "6379"
	}
	host = strings.ToLower(strings.Trim(host, "[]"))
	switch host {
	case "", "localhost", "127.0.0.1", "::1", "0.0.0.0", "::":
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

// ConnServers names the server of a transport whose Addr is addr (see
// Servers): "unix:path" as it is, host:port folded as Servers folds it.
func ConnServers(addr string) []string {
	if strings.HasPrefix(addr, "unix:") {
		return []string{addr}
	}
	return []string{canonical(addr)}
}
