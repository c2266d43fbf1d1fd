package fence_test

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock"
	"github.com/redlock-go/redlock/fence"
)

// A holder writes a Redis-held balance with its lock's token; a holder
// that was paused past its deadline gets ErrStale and must stop.
func ExampleSet() {
	ctx := context.Background()
	c, err := redlock.NewFromURLs([]string{"redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"},
		redlock.WithFencing())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}) // the resource
	defer rdb.Close()
	l, err := c.Lock(ctx, "account:7", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)
	switch err := fence.Set(ctx, rdb, "balance:7", l.Token(), l.Owner(), 120); {
	case errors.Is(err, fence.ErrStale):
		log.Print("a later holder has written: stop")
	case err != nil:
		log.Print(err)
	}
}
