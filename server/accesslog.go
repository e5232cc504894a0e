package server

import (
	"context"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prodapi/prodapi/sources/codec"
)

// An accessLine is what the access log says about one request.
type accessLine struct {
	time     time.Time
	level    slog.Level
	method   string
	route    string
	path     string
	status   int
	bytes    int64
	duration time.Duration
	id       string
	outcome  string
	err      error
}

// accessLogger writes access lines. With a writer, it encodes each line
// itself, in the format of log/slog's JSONHandler (same keys, same time
// format), one Write per line: the generic slog path cost more than the
// rest of a cache hit. Without one, lines go through the slog logger.
type accessLogger struct {
	w      io.Writer // nil: use logger
	logger *slog.Logger
	pool   sync.Pool // *[]byte
	hits   *sampler  // which cache hits get a line
}

// A sampler picks one in every n events, by count: no randomness, no
// allocation. n 1 picks all, 0 none.
type sampler struct {
	every uint64
	seen  atomic.Uint64
}

// newSampler picks a share of events; nil picks all.
func newSampler(share *float64) *sampler {
	switch {
	case share == nil || *share >= 1:
		return &sampler{every: 1}
	case *share <= 0 || math.IsNaN(*share):
		return &sampler{}
	}
	return &sampler{every: uint64(math.Round(1 / *share))}
}

func (s *sampler) pick() bool {
	switch s.every {
	case 0:
		return false
	case 1:
		return true
	}
	return s.seen.Add(1)%s.every == 0
}

func (a *accessLogger) log(ctx context.Context, r accessLine) {
	if a.w == nil {
		attrs := [...]slog.Attr{
			slog.String("method", r.method),
			slog.String("route", r.route),
			slog.String("path", r.path),
			slog.Int("status", r.status),
			slog.Int64("bytes", r.bytes),
			slog.Int64("duration_us", r.duration.Microseconds()),
			slog.String("request_id", r.id),
			{}, {},
		}
		n := 7
		if r.outcome != "" {
			attrs[n] = slog.String("cache", r.outcome)
			n++
		}
		if r.err != nil {
			attrs[n] = errAttr(r.err)
			n++
		}
		a.logger.LogAttrs(ctx, r.level, "request", attrs[:n]...)
		return
	}
	bp, _ := a.pool.Get().(*[]byte)
	if bp == nil {
		b := make([]byte, 0, 512)
		bp = &b
	}
	b := append((*bp)[:0], `{"time":"`...)
	b = r.time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"`...)
	b = append(b, r.level.String()...)
	b = append(b, `","msg":"request","method":`...)
	b = codec.AppendJSONString(b, r.method)
	b = append(b, `,"route":`...)
	b = codec.AppendJSONString(b, r.route)
	b = append(b, `,"path":`...)
	b = codec.AppendJSONString(b, r.path)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(r.status), 10)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, r.bytes, 10)
	b = append(b, `,"duration_us":`...)
	b = strconv.AppendInt(b, r.duration.Microseconds(), 10)
	b = append(b, `,"request_id":`...)
	b = codec.AppendJSONString(b, r.id)
	if r.outcome != "" {
		b = append(b, `,"cache":`...)
		b = codec.AppendJSONString(b, r.outcome)
	}
	if r.err != nil {
		b = append(b, `,"error":`...)
		b = codec.AppendJSONString(b, r.err.Error())
	}
	b = append(b, "}\n"...)
	a.w.Write(b)
	*bp = b
	a.pool.Put(bp)
}
