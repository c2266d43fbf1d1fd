// Package nodeurl parses and displays Redis node URLs, for the library's
// NewFromURLs and the redlock command alike.
package nodeurl

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Parse checks a node URL for what go-redis's ParseURL lets through (no
// host: it would silently become localhost:6379; a port out of range: it
// would fail only at the first call) and then parses it with go-redis.
// Schemes: redis, rediss, unix. Its errors begin with the URL as Mask
// shows it, never the password. The options are go-redis's, unchanged.
func Parse(s string) (*redis.Options, error) {
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, password and all
		}
		return nil, fmt.Errorf("%s: %v", Mask(s), err)
	}
	shown := mask(u)
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

// Mask returns s with its password, in the user info or a password= query
// parameter, replaced by xxxxx, for errors and output. A URL that net/url
// cannot parse is masked as text; one without "://" shows as
// "(unparsable URL)".
func Mask(s string) string {
	if u, err := url.Parse(s); err == nil {
		return mask(u)
	}
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

func mask(u *url.URL) string {
	c := *u
	if q := c.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		c.RawQuery = q.Encode()
	}
	return c.Redacted()
}
