package fence

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"
)

// sent counts the commands a client tried to send.
type sent struct{ n int }

func (h *sent) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *sent) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n++; return next(ctx, cmd) }
}
func (h *sent) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n += len(cmds); return next(ctx, cmds) }
}

// TestBadInputBeforeTraffic: bad input is an error, not ErrStale, and
// nothing is sent (the client points nowhere).
func TestBadInputBeforeTraffic(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	defer rdb.Close()
	h := &sent{}
	rdb.AddHook(h)
	ctx := context.Background()
	for name, err := range map[string]error{
		"empty holder":      Set(ctx, rdb, "k", 1, "", "v"),
		"empty holder hset": HSet(ctx, rdb, "k", 1, "", "f", "v"),
		"token 0":           Set(ctx, rdb, "k", 0, "me", "v"),
		"negative token":    HSet(ctx, rdb, "k", -3, "me", "f", "v"),
		"empty key":         Set(ctx, rdb, "", 1, "me", "v"),
		"odd pairs":         HSet(ctx, rdb, "k", 1, "me", "f"),
		"nil client":        Set(ctx, nil, "k", 1, "me", "v"),
	} {
		if err == nil || errors.Is(err, ErrStale) {
			t.Errorf("%s: %v, want an input error", name, err)
		}
	}
	if h.n != 0 {
		t.Fatalf("%d commands sent for bad input", h.n)
	}
}
