package main

import (
	"context"
	"iter"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/prodapi/prodapi/sources"
)

// limits bound what one request to a server carries: at most docs
// documents and, but for a single document larger than that, bytes
// bytes.
type limits struct {
	docs, bytes int
}

// A batch is encoded documents, one after another in buf: document i
// ends at ends[i].
type batch struct {
	buf  []byte
	ends []int
}

func (b batch) len() int { return len(b.ends) }

// item is document i's encoding.
func (b batch) item(i int) []byte {
	start := 0
	if i > 0 {
		start = b.ends[i-1]
	}
	return b.buf[start:b.ends[i]]
}

// sub is documents [i, j) as a batch of their own.
func (b batch) sub(i, j int) batch {
	start := 0
	if i > 0 {
		start = b.ends[i-1]
	}
	out := batch{buf: b.buf[start:b.ends[j-1]], ends: make([]int, j-i)}
	for n := range out.ends {
		out.ends[n] = b.ends[i+n] - start
	}
	return out
}

// pick is the documents of b at the given indexes, as a new batch.
func (b batch) pick(indexes []int) batch {
	var out batch
	for _, i := range indexes {
		out.buf = append(out.buf, b.item(i)...)
		out.ends = append(out.ends, len(out.buf))
	}
	return out
}

// batches encodes docs with enc into batches within lim and hands them
// to send, from inFlight goroutines at once (1 when inFlight < 1): the
// batches go in order, and with inFlight 1 each is sent after the one
// before has been. The next batch is encoded while those are sent, and
// at most inFlight+1 batches are held, so memory stays bounded whatever
// the number of documents. The first failure stops the rest: the
// encoding ends, no new batch is sent, and it is the result.
func batches(ctx context.Context, docs iter.Seq[*sources.Doc], lim limits, inFlight int,
	enc func(dst []byte, d *sources.Doc) ([]byte, error), send func(context.Context, batch) error) error {
	g, ctx := errgroup.WithContext(ctx)
	ready := make(chan batch)
	// The encoder ends when docs do, on an encoding error, or when a
	// send failed (ctx is cancelled then).
	g.Go(func() error {
		defer close(ready)
		var b batch
		flush := func() bool {
			select {
			case ready <- b:
				b = batch{}
				return true
			case <-ctx.Done():
				return false
			}
		}
		for d := range docs {
			start := len(b.buf)
			var err error
			if b.buf, err = enc(b.buf, d); err != nil {
				return err
			}
			if len(b.ends) > 0 && len(b.buf) > lim.bytes {
				// This document would overflow the batch: it starts the next.
				item := append([]byte(nil), b.buf[start:]...)
				b.buf = b.buf[:start]
				if !flush() {
					return ctx.Err()
				}
				b.buf = item
			}
			b.ends = append(b.ends, len(b.buf))
			if len(b.ends) >= lim.docs || len(b.buf) >= lim.bytes {
				if !flush() {
					return ctx.Err()
				}
			}
		}
		if len(b.ends) > 0 && !flush() {
			return ctx.Err()
		}
		return nil
	})
	// Each sender ends when the encoder has closed ready, or on its first
	// failure, which cancels ctx for the others (they finish the request
	// in hand, which ctx ends, and take no other).
	for range max(inFlight, 1) {
		g.Go(func() error {
			for b := range ready {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if err := send(ctx, b); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// A progress logs how far a stage of n documents is, at most once per
// every (every batch when every is 0), then once at the end. Its add is
// safe for concurrent use.
type progress struct {
	mu     sync.Mutex
	logger *slog.Logger
	msg    string
	attrs  []any // what the stage works on, for every line
	total  int
	every  time.Duration
	now    func() time.Time

	done  int
	start time.Time
	last  time.Time
}

func newProgress(logger *slog.Logger, every time.Duration, now func() time.Time, msg string, total int, attrs ...any) *progress {
	if now == nil {
		now = time.Now
	}
	t := now()
	return &progress{logger: logger, msg: msg, attrs: attrs, total: total, every: every, now: now, start: t, last: t}
}

// add counts n more documents done, and logs when it is time.
func (p *progress) add(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	if t := p.now(); t.Sub(p.last) >= p.every && p.done < p.total {
		p.last = t
		p.logger.Info(p.msg, append(p.attrs, "documents", p.done, "of", p.total, "docs_per_s", p.rate(t))...)
	}
}

// end logs the stage's last line, msg, with its count, time and rate.
func (p *progress) end(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.now()
	p.logger.Info(msg, append(p.attrs, "documents", p.done, "duration", t.Sub(p.start).Round(time.Millisecond).String(),
		"docs_per_s", p.rate(t))...)
}

func (p *progress) rate(t time.Time) int {
	s := t.Sub(p.start).Seconds()
	if s <= 0 {
		return 0
	}
	return int(float64(p.done) / s)
}
