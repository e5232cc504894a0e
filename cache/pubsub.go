package cache

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A subscriber listens for the invalidations other replicas publish.
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

func newReplicaID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}

// An invalidation message is the sender's replica id, then one tag per
// line. A document id may hold a newline (MongoDB allows any string): its
// tag would read as two, and the document's entries would stay, so the
// message names the document's whole resource instead. The others drop
// more than they must; none keeps what it must drop.
func invalidationMessage(id string, tags []string) string {
	var b strings.Builder
	b.WriteString(id)
	for _, t := range tags {
		if strings.Contains(t, "\n") {
			doc, isDoc := strings.CutPrefix(t, tagDoc)
			res, _, _ := strings.Cut(doc, "/")
			t = tagResource + res
			if !isDoc || strings.Contains(res, "\n") {
				t = tagAll
			}
		}
		b.WriteByte('\n')
		b.WriteString(t)
	}
	return b.String()
}

func parseInvalidation(payload string) (sender string, tags []string, ok bool) {
	sender, rest, ok := strings.Cut(payload, "\n")
	if !ok || sender == "" || rest == "" {
		return "", nil, false
	}
	return sender, strings.Split(rest, "\n"), true
}

// subscribe starts listening on the invalidation channel. Close stops it.
func (c *Cache) subscribe() {
	c.sub.ps = c.rdb.Subscribe(c.base, channel)
	c.sub.done = make(chan struct{})
	// Ends when Close cancels the base context and closes the PubSub.
	go c.listen()
}

// listen applies the invalidations other replicas publish. A
// subscription confirmation after a failure (go-redis reconnected and
// subscribed again, or the first subscription came late) empties the
// in-process tier and fences the fills under way: while unsubscribed,
// messages may have been missed.
func (c *Cache) listen() {
	defer close(c.sub.done)
	backoff := subscriberBackoff
	failed := false
	for {
		msg, err := c.sub.ps.ReceiveTimeout(c.base, subscriberPing)
		if c.base.Err() != nil {
			return
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				// Silence: ask, so that a dead connection shows.
				_ = c.sub.ps.Ping(c.base)
				continue
			}
			failed = true
			c.known.setLive(false)
			c.metrics.subscribed.Set(0)
			c.log.Debug("cache: invalidation subscription lost", "error", err)
			select {
			case <-c.base.Done():
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
				if failed {
					c.inval.add([]string{tagAll})
					c.local.clear()
					failed = false
				}
				c.known.setLive(true)
				c.metrics.subscribed.Set(1)
				c.metrics.resubscribes.Inc()
			}
		case *redis.Message:
			sender, tags, ok := parseInvalidation(m.Payload)
			if !ok {
				c.log.Warn("cache: ignoring a malformed invalidation message")
				continue
			}
			c.metrics.invalidationsReceived.Inc()
			if sender != c.id {
				c.applyInvalidation(tags)
			}
		}
	}
}

// stopListening ends the subscriber; the base context is cancelled.
func (c *Cache) stopListening() {
	if c.sub.ps == nil {
		return
	}
	_ = c.sub.ps.Close()
	<-c.sub.done
}
