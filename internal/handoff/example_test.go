package handoff_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redlock-go/redlock/internal/handoff"
)

// Two local waiters for one key, on a Hub without nodes (local hand-off
// only; with nodes, their release notifications wake the head too).
func Example() {
	hub, err := handoff.New(nil, handoff.Config{})
	if err != nil {
		panic(err)
	}
	defer hub.Close()
	ctx := context.Background()

	first := hub.EnterWant("stock:42", nil)  // head: it tries on the nodes
	second := hub.EnterWant("stock:42", nil) // behind it: it does not
	promoted := make(chan bool)
	go func() {
		woken, _ := second.Wait(ctx, 0) // blocks until head
		promoted <- woken
	}()
	first.Leave() // acquired the lock (or gave up): the next tries at once
	fmt.Println("promoted:", <-promoted)

	// Between two tries, the head waits for a release or its backoff.
	hub.ReleasedOwner("stock:42", "") // this process released the key
	woken, _ := second.Wait(ctx, time.Minute)
	fmt.Println("woken by the release:", woken)
	second.Leave()

	s := hub.Stats()
	fmt.Println("promoted:", s.Promoted, "local:", s.Local, "timer:", s.Timer)
	// Output:
	// promoted: true
	// woken by the release: true
	// promoted: 1 local: 1 timer: 0
}
