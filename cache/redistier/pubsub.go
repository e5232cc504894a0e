package redistier

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Channel is the pub/sub channel invalidations travel on. A message is the
// sender's replica id, a newline, then the payload.
const Channel = Prefix + "invalidations"

// A Listener hears the channel (Subscribe). Its methods run one at a time,
// on the subscription's goroutine.
type Listener interface {
	// Subscribed reports a subscription confirmed. missed is true when
	// the replica was not subscribed for a while before (a failure, or a
	// first subscription that came late): messages may have been lost.
	Subscribed(missed bool)
	// Unsubscribed reports a subscription lost: until the next
	// Subscribed, messages may be lost.
	Unsubscribed()
	// Message is the payload of a message another replica published.
	Message(payload string)
}

// A subscriber listens on the channel for Subscribe.
type subscriber struct {
	ps   *redis.PubSub
	done chan struct{} // closed when listen returns
}

// Pub/sub health: a connection silent for subscriberPing is pinged, so a
// cut that TCP does not notice is found; after an error the subscriber
// waits subscriberBackoff (doubling up to subscriberMaxBackoff) before it
// reconnects.
const (
	subscriberPing       = 5 * time.Second
	subscriberBackoff    = 50 * time.Millisecond
	subscriberMaxBackoff = 2 * time.Second
)

// Publish sends payload to the other replicas on the channel. Without
// Redis there is nobody to tell.
func (t *Tier) Publish(ctx context.Context, payload string) error {
	if t.rdb == nil {
		return nil
	}
	ctx, cancel := t.controlCtx(ctx)
	defer cancel()
	if err := t.rdb.Publish(ctx, Channel, t.id+"\n"+payload).Err(); err != nil {
		t.metrics.redisErrors.Inc("invalidate")
		return err
	}
	return nil
}

// Subscribe starts listening on the channel and tells l what it hears,
// until Close. It is called once, and does nothing without Redis. go-redis
// reconnects a lost subscription; a silent one is pinged every 5s, so
// that a cut shows.
func (t *Tier) Subscribe(l Listener) {
	if t.rdb == nil {
		return
	}
	t.sub.ps = t.rdb.Subscribe(t.base, Channel)
	t.sub.done = make(chan struct{})
	// Ends when Close cancels the base context and closes the PubSub.
	go t.listen(l)
}

// listen tells l what the subscription hears: its confirmations, its
// failures and the other replicas' messages.
func (t *Tier) listen(l Listener) {
	defer close(t.sub.done)
	backoff := subscriberBackoff
	failed := false
	for {
		msg, err := t.sub.ps.ReceiveTimeout(t.base, subscriberPing)
		if t.base.Err() != nil {
			return
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// Silence: ask, so that a dead connection shows.
				_ = t.sub.ps.Ping(t.base)
				continue
			}
			failed = true
			l.Unsubscribed()
			t.metrics.subscribed.Set(0)
			t.log.Debug("redistier: subscription lost", "error", err)
			select {
			case <-t.base.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, subscriberMaxBackoff)
			continue
		}
		backoff = subscriberBackoff
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				// The listener first: once the count shows the
				// subscription, what it implies has been done.
				l.Subscribed(failed)
				failed = false
				t.metrics.subscribed.Set(1)
				t.metrics.resubscribes.Inc()
			}
		case *redis.Message:
			sender, payload, ok := strings.Cut(m.Payload, "\n")
			if !ok || sender == "" || payload == "" {
				t.log.Warn("redistier: ignoring a malformed message")
				continue
			}
			t.metrics.invalidationsReceived.Inc()
			if sender != t.id {
				l.Message(payload)
			}
		}
	}
}

// stop ends the subscriber; the base context is cancelled.
func (s *subscriber) stop() {
	if s.ps == nil {
		return
	}
	_ = s.ps.Close()
	<-s.done
}
