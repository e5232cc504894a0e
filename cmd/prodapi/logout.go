package main

import (
	"errors"
	"io"
	"sync"
	"time"

	"github.com/prodapi/prodapi/server/metrics"
)

// logOutput is where the JSON logs go: lines from every writer (the slog
// handler, the access log) are appended to a bounded buffer, and one
// writer goroutine writes them out at most every flushEvery, sooner when
// batchBytes are waiting, and at Close. A busy server then pays one
// write(2) per batch instead of one per request; a crash loses at most
// flushEvery of lines.
//
// Logging never stops serving: Write only copies into memory. When the
// sink blocks (a full pipe, a stuck collector) the buffer fills up to
// maxPending and further lines are dropped and counted
// (prodapi_log_lines_dropped_total) until the sink drains.
type logOutput struct {
	w       io.Writer
	dropped *metrics.Counter

	mu      sync.Mutex
	pending []byte // lines waiting for the writer
	lost    uint64 // lines dropped, for tests when dropped is nil

	wake chan struct{} // a batch is waiting; capacity 1
	stop chan struct{}
	done chan struct{}
}

const (
	flushEvery = 100 * time.Millisecond
	batchBytes = 64 << 10
	maxPending = 4 << 20
	// closeWait is how long Close waits for a blocked sink to take the
	// last lines before giving up on them.
	closeWait = 5 * time.Second
)

var errLogSinkBlocked = errors.New("log output: the sink is blocked; the last lines were not written")

// newLogOutput writes to w; dropped (nil-safe) counts the lines dropped.
func newLogOutput(w io.Writer, dropped *metrics.Counter) *logOutput {
	o := &logOutput{w: w, dropped: dropped, wake: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	dropped.Add(0) // the series shows from the start, at 0
	go o.run()     // ends when Close closes stop
	return o
}

// Write queues p, a whole line (callers write one line per call). It
// never blocks on the sink and never fails: a line that does not fit is
// dropped and counted.
func (o *logOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	if len(o.pending)+len(p) > maxPending {
		o.lost++
		o.mu.Unlock()
		o.dropped.Inc()
		return len(p), nil
	}
	o.pending = append(o.pending, p...)
	full := len(o.pending) >= batchBytes
	o.mu.Unlock()
	if full {
		select {
		case o.wake <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

// run is the writer: it alone writes to the sink, outside the lock.
func (o *logOutput) run() {
	defer close(o.done)
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	var spare []byte
	for {
		select {
		case <-t.C:
		case <-o.wake:
		case <-o.stop:
			o.writeOut(spare)
			return
		}
		spare = o.writeOut(spare)
	}
}

// writeOut swaps the pending lines out and writes them; it returns the
// emptied buffer for reuse.
func (o *logOutput) writeOut(spare []byte) []byte {
	o.mu.Lock()
	batch := o.pending
	o.pending = spare[:0]
	o.mu.Unlock()
	if len(batch) > 0 {
		// A failed write loses its batch: there is nowhere to report it.
		_, _ = o.w.Write(batch)
	}
	if cap(batch) > 2*maxPending {
		return nil
	}
	return batch[:0]
}

// droppedLines reports how many lines were dropped so far.
func (o *logOutput) droppedLines() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lost
}

// Close writes out what is left and stops the writer. A sink still
// blocked after closeWait keeps the last lines: Close returns an error
// rather than hang the shutdown.
func (o *logOutput) Close() error {
	close(o.stop)
	select {
	case <-o.done:
		return nil
	case <-time.After(closeWait):
		return errLogSinkBlocked
	}
}
