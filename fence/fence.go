// Package fence is the protected resource's side of fencing tokens (see
// redlock.WithFencing and Lock.Token): the resource remembers the highest
// token it has seen and the holder that wrote with it, and refuses a write
// that carries a lower token, or the same token from another holder. A
// lock holder that was paused past its lock's deadline (a GC pause, a
// stopped VM, a long network stall) wakes up still believing it holds the
// lock; its token is lower than the one of whoever acquired the lock
// meanwhile, so once the later holder has written, the stale write is
// refused instead of silently overwriting it. The holder check makes a
// token repeated (only possible if the clock assumption of WithFencing
// broke) refused rather than taken for the same holder writing again.
//
// Set and HSet do this for a resource kept in Redis, in one script. For
// an SQL database, keep the token (a 64-bit column) and the holder
// (Lock.Owner) in the row and make them part of the write's condition:
//
//	UPDATE stock SET qty = qty - $1, fence = $2, holder = $3
//	 WHERE id = $4 AND qty >= $1
//	   AND (fence < $2 OR (fence = $2 AND holder = $3))
//
// and treat zero rows updated as refused (stale token, or not enough
// stock). If each hold writes the row only once, "AND fence < $2" alone
// will do: it refuses every equal token, whoever carries it. The runnable
// example in examples/stock of this repository does this against
// PostgreSQL.
//
// A token protects only writes that check it: reads, and writes to
// systems that do not check it, are not fenced.
package fence

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/internal/node"
)

//go:embed write.lua
var writeSrc string

var writeScript = redis.NewScript(writeSrc)

// ErrStale is returned by a write whose token is lower than one the
// resource has already seen, or equal to it but from another holder: a
// later lock holder has written, and this holder must stop.
var ErrStale = errors.New("fence: stale token: a later lock holder has written")

// TokenKey returns the key where Set and HSet keep the highest token seen
// for resource key k and the holder that wrote with it, as the string
// "<token> <holder>": k with the suffix ":token", and k in braces when k
// has no hash tag, so that on a Redis Cluster it shares k's hash slot.
func TokenKey(k string) string {
	if _, ok := node.HashTag(k); ok {
		return k + ":token"
	}
	return "{" + k + "}:token"
}

// Set sets key to value if token is higher than the highest token seen
// for key, or equal to it and written by the same holder, and records
// token and holder. holder names the lock holder: pass Lock.Owner(), which
// is unique to each acquisition. It returns ErrStale, writing nothing, if
// a higher token was seen, or the same token from another holder. Bad
// input (no context or client, empty key or holder, token not positive)
// is an error before any call. It is one script call, atomic on the
// server, and safe for concurrent use.
func Set(ctx context.Context, rdb redis.Scripter, key string, token int64, holder string, value any) error {
	return write(ctx, rdb, key, token, holder, "set", value)
}

// HSet sets the given field/value pairs of hash key, under the same rule
// as Set.
func HSet(ctx context.Context, rdb redis.Scripter, key string, token int64, holder string, fieldValues ...any) error {
	if len(fieldValues) == 0 || len(fieldValues)%2 != 0 {
		return fmt.Errorf("fence: HSet %q: need field/value pairs, got %d arguments", key, len(fieldValues))
	}
	return write(ctx, rdb, key, token, holder, "hset", fieldValues...)
}

func write(ctx context.Context, rdb redis.Scripter, key string, token int64, holder, op string, vals ...any) error {
	switch {
	case ctx == nil:
		return errors.New("fence: nil context")
	case rdb == nil:
		return errors.New("fence: nil client")
	case key == "":
		return errors.New("fence: empty key")
	case token <= 0:
		return fmt.Errorf("fence: token %d must be positive (Lock.Token is 0 when the Client has no WithFencing)", token)
	case holder == "":
		return errors.New("fence: empty holder (pass Lock.Owner)")
	}
	args := append([]any{token, holder, op}, vals...)
	n, err := writeScript.Run(ctx, rdb, []string{key, TokenKey(key)}, args...).Int64()
	switch {
	case err != nil:
		return fmt.Errorf("fence: write %q: %w", key, err)
	case n == 0:
		return fmt.Errorf("%w: %q refused token %d of holder %q", ErrStale, key, token, holder)
	}
	return nil
}
