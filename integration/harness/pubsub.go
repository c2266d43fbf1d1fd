package harness

import (
	"context"
	"testing"
	"time"
)

// WaitSubscribers waits until channel has a subscriber on every node (a
// lock Client subscribes in the background when a key's first waiter
// queues), or fails the test after a minute.
func WaitSubscribers(t testing.TB, nodes []*Node, channel string) {
	t.Helper()
	guard := time.Now().Add(time.Minute)
	for _, n := range nodes {
		cl := n.Client()
		for {
			got, err := cl.PubSubNumSub(context.Background(), channel).Result()
			if err == nil && got[channel] > 0 {
				break
			}
			if time.Now().After(guard) {
				cl.Close()
				t.Fatalf("no subscriber to %s on %s", channel, n.Addr)
			}
			time.Sleep(5 * time.Millisecond)
		}
		cl.Close()
	}
}
