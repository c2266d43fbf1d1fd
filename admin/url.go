package admin

import (
	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/internal/nodeurl"
)

// URLError is ParseURL's error for a node URL it refuses. It matches
// redlock.ErrInvalidArgument (errors.Is).
type URLError struct {
	// URL is the URL as MaskURL shows it, never with its password.
	URL string
	// Err says what is wrong; its text begins with URL.
	Err error
}

func (e *URLError) Error() string { return "redlock: bad node URL " + e.Err.Error() }

// Unwrap returns Err.
func (e *URLError) Unwrap() error { return e.Err }

// Is reports whether target is redlock.ErrInvalidArgument.
func (e *URLError) Is(target error) bool { return target == redlock.ErrInvalidArgument }

// ParseURL parses a node URL exactly as redlock.NewFromURLs checks it:
// schemes redis, rediss and unix; a redis or rediss URL needs a host and
// a port in 1-65535 if it names one, a unix URL a socket path; the rest is
// go-redis's ParseURL (user, password, db, query options). It returns
// go-redis's options unchanged (NewFromURLs then sets its own timeouts and
// retries: set yours), a new value on every call. A URL it refuses gets a
// *URLError, without sending anything.
func ParseURL(s string) (*redis.Options, error) {
	o, err := nodeurl.Parse(s)
	if err != nil {
		return nil, &URLError{URL: nodeurl.Mask(s), Err: err}
	}
	return o, nil
}

// MaskURL returns s with its password, in the user info or a password=
// query parameter, replaced by xxxxx: the form to print or log. It never
// fails: a URL that does not parse is masked as text, and one without
// "://" shows as "(unparsable URL)".
func MaskURL(s string) string { return nodeurl.Mask(s) }
