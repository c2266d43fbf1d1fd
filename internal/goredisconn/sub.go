package goredisconn

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redlock-go/redlock/transport"
)

// Subscribe implements transport.Conn: a go-redis PubSub, on plain
// clients only (a cluster client would need a sharded subscription per
// hash slot; a ring has no single node to subscribe on).
func (c *Conn) Subscribe(ctx context.Context) (transport.Subscription, error) {
	cl, ok := c.c.(*redis.Client)
	if !ok {
		return nil, transport.ErrNoPubSub
	}
	return &sub{ps: cl.Subscribe(ctx)}, nil
}

// sub is a go-redis PubSub as a transport.Subscription.
type sub struct{ ps *redis.PubSub }

func (s *sub) Subscribe(ctx context.Context, channels ...string) error {
	return s.ps.Subscribe(ctx, channels...)
}

func (s *sub) Unsubscribe(ctx context.Context, channels ...string) error {
	return s.ps.Unsubscribe(ctx, channels...)
}

func (s *sub) Ping(ctx context.Context) error { return s.ps.Ping(ctx) }

func (s *sub) Close() error { return s.ps.Close() }

func (s *sub) Receive(ctx context.Context, timeout time.Duration) (transport.Event, error) {
	for {
		msg, err := s.ps.ReceiveTimeout(ctx, timeout)
		if err != nil {
			return transport.Event{}, err
		}
		switch m := msg.(type) {
		case *redis.Message:
			return transport.Event{Kind: transport.Message, Channel: m.Channel, Payload: m.Payload}, nil
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe":
				return transport.Event{Kind: transport.Subscribed, Channel: m.Channel}, nil
			case "unsubscribe":
				return transport.Event{Kind: transport.Unsubscribed, Channel: m.Channel}, nil
			}
		case *redis.Pong:
			return transport.Event{Kind: transport.Pong}, nil
		}
	}
}
