package harness

import "go.uber.org/goleak"

// IgnoreRedisDial is the goleak option for the one goroutine the tests
// leave that is not ours: go-redis's pool retries a failed dial in the
// background (tryDial) and only notices Close after its 5s dial timeout; a
// dial to a frozen or killed node hangs that long.
func IgnoreRedisDial() goleak.Option {
	return goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial")
}
