package redlock

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// parseURL checks a node URL for what go-redis's ParseURL lets through
// (no host: it would silently become localhost:6379; a port out of range:
// it would fail only at the first lock) and then parses it. Its errors
// show the URL with the password masked.
func parseURL(s string) (*redis.Options, error) {
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, password and all
		}
		return nil, fmt.Errorf("%s: %v", maskURL(s), err)
	}
	shown := u.Redacted()
	switch u.Scheme {
	case "redis", "rediss":
		if u.Hostname() == "" {
			return nil, fmt.Errorf("%s: no host", shown)
		}
		if p := u.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return nil, fmt.Errorf("%s: port %s is not in 1-65535", shown, p)
			}
		}
	case "unix":
		if u.Path == "" {
			return nil, fmt.Errorf("%s: no socket path", shown)
		}
	default:
		return nil, fmt.Errorf("%s: scheme %q is not redis, rediss or unix", shown, u.Scheme)
	}
	o, err := redis.ParseURL(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", shown, err)
	}
	return o, nil
}

// maskURL hides the password of a URL that net/url cannot parse.
func maskURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return "(unparsable URL)"
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return s
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return s
	}
	return scheme + "://" + user + ":xxxxx" + rest[at:]
}
