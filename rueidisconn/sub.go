package rueidisconn

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlock-go/redlock/transport"
)

// Subscribe implements transport.Conn: a dedicated connection, taken on
// the subscription's first call and again after it broke (then every
// channel asked for is subscribed again).
func (cn *Conn) Subscribe(ctx context.Context) (transport.Subscription, error) {
	return &sub{cn: cn, want: make(map[string]bool), events: make(chan transport.Event, 1024), done: make(chan struct{})}, nil
}

// errReceiveTimeout is Receive's error when nothing arrived in time.
type errReceiveTimeout struct{}

func (errReceiveTimeout) Error() string   { return "redlock: rueidisconn: receive timed out" }
func (errReceiveTimeout) Timeout() bool   { return true }
func (errReceiveTimeout) Temporary() bool { return true }

var errSubClosed = errors.New("redlock: rueidisconn: subscription closed")

// sub is a rueidis dedicated connection as a transport.Subscription.
type sub struct {
	cn     *Conn
	events chan transport.Event // from the hooks, and refusals (as errors, see refusals)
	done   chan struct{}        // closed by Close

	mu       sync.Mutex
	dc       rueidis.DedicatedClient // nil: to take (again)
	broken   <-chan error
	want     map[string]bool
	closed   bool
	refusals []error // error replies to commands sent on it, for Receive
}

// conn returns the dedicated connection, taking one, with its hooks and
// every wanted channel subscribed, if there is none. s.mu is held.
func (s *sub) conn(ctx context.Context) (rueidis.DedicatedClient, error) {
	if s.closed {
		return nil, errSubClosed
	}
	if s.dc != nil {
		return s.dc, nil
	}
	c, err := s.cn.client(ctx)
	if err != nil {
		return nil, err
	}
	dc, _ := c.Dedicate() // given back by its Close (drop)
	broken := dc.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage: func(m rueidis.PubSubMessage) {
			s.push(transport.Event{Kind: transport.Message, Channel: m.Channel, Payload: m.Message})
		},
		OnSubscription: func(m rueidis.PubSubSubscription) {
			switch m.Kind {
			case "subscribe":
				s.push(transport.Event{Kind: transport.Subscribed, Channel: m.Channel})
			case "unsubscribe":
				s.push(transport.Event{Kind: transport.Unsubscribed, Channel: m.Channel})
			}
		},
	})
	s.dc, s.broken = dc, broken
	if len(s.want) > 0 {
		chs := make([]string, 0, len(s.want))
		for c := range s.want {
			chs = append(chs, c)
		}
		if err := s.send(ctx, dc, "subscribe", chs); err != nil {
			return nil, err
		}
	}
	return dc, nil
}

// push hands an event to Receive; a reader that fell 1024 events behind
// loses the oldest kind of hint only (a release notification), never
// blocks the connection.
func (s *sub) push(e transport.Event) {
	select {
	case s.events <- e:
	default:
	}
}

// send sends verb with channels on dc; an error reply is kept for
// Receive, a transport error drops the connection. s.mu is held.
func (s *sub) send(ctx context.Context, dc rueidis.DedicatedClient, verb string, chs []string) error {
	var cmd rueidis.Completed
	switch verb {
	case "subscribe":
		cmd = dc.B().Subscribe().Channel(chs...).Build()
	case "unsubscribe":
		cmd = dc.B().Unsubscribe().Channel(chs...).Build()
	default:
		cmd = dc.B().Ping().Build()
	}
	err := dc.Do(ctx, cmd).Error()
	if err == nil {
		return nil
	}
	if err = classify(err); err == nil {
		return nil
	}
	if transport.IsErrorReply(err) {
		s.refusals = append(s.refusals, err)
		s.push(transport.Event{}) // wakes Receive
		return err
	}
	s.drop()
	return err
}

// drop closes the connection (one in pub/sub mode is not reused); the
// next call takes another. s.mu is held.
func (s *sub) drop() {
	if s.dc != nil {
		s.dc.Close()
		s.dc, s.broken = nil, nil
	}
}

func (s *sub) Subscribe(ctx context.Context, channels ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range channels {
		s.want[c] = true
	}
	if s.dc == nil {
		_, err := s.conn(ctx) // subscribes every wanted channel
		return err
	}
	return s.send(ctx, s.dc, "subscribe", channels)
}

func (s *sub) Unsubscribe(ctx context.Context, channels ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range channels {
		delete(s.want, c)
	}
	if s.dc == nil {
		return nil
	}
	return s.send(ctx, s.dc, "unsubscribe", channels)
}

func (s *sub) Ping(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	dc, err := s.conn(ctx)
	if err != nil {
		return err
	}
	if err := s.send(ctx, dc, "ping", nil); err != nil {
		return err
	}
	s.push(transport.Event{Kind: transport.Pong})
	return nil
}

func (s *sub) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		s.drop()
		close(s.done)
	}
	return nil
}

// Receive implements transport.Subscription.
func (s *sub) Receive(ctx context.Context, timeout time.Duration) (transport.Event, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return transport.Event{}, errSubClosed
	}
	broken := s.broken
	if broken == nil {
		if _, err := s.conn(ctx); err != nil {
			s.mu.Unlock()
			return transport.Event{}, err
		}
		broken = s.broken
	}
	s.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		if err := s.refused(); err != nil {
			return transport.Event{}, err
		}
		select {
		case <-s.done:
			return transport.Event{}, errSubClosed
		case e := <-s.events:
			if e.Kind != 0 {
				return e, nil
			}
		case err := <-broken:
			s.mu.Lock()
			s.drop()
			s.mu.Unlock()
			if err == nil {
				err = errSubClosed
			}
			return transport.Event{}, err
		case <-t.C:
			return transport.Event{}, errReceiveTimeout{}
		case <-ctx.Done():
			return transport.Event{}, ctx.Err()
		}
	}
}

// refused returns the oldest error reply not yet received, if any.
func (s *sub) refused() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.refusals) == 0 {
		return nil
	}
	err := s.refusals[0]
	s.refusals = s.refusals[1:]
	return err
}
