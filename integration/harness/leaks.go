package harness

import (
	"context"
	"os"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// IgnoreRedisDial is the goleak option for the one goroutine the tests
// leave that is not ours: go-redis's pool retries a failed dial in the
// background (tryDial) and only notices Close after its 5s dial timeout; a
// dial to a frozen or killed node hangs that long.
func IgnoreRedisDial() goleak.Option {
	return goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial")
}

// QuietRedisLogs sends go-redis's own log lines ("failed to dial ...",
// one per refused connection while a test has a node down) nowhere, unless
// REDIS_LOGS is set: the tests' verdicts and their own logs stay readable.
// Call it from TestMain.
func QuietRedisLogs() {
	if os.Getenv("REDIS_LOGS") == "" {
		redis.SetLogger(quiet{})
	}
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...interface{}) {}

// IgnoreRedial leaves rueidis's and valkey-go's reconnection back-off out
// of goleak's count: a goroutine that sleeps up to a second after a failed
// dial, then ends, even after the client closed.
func IgnoreRedial() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"),
		goleak.IgnoreAnyFunction("github.com/valkey-io/valkey-go.(*call).DelayDo.func1"),
	}
}
