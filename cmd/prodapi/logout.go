package main

import (
	"bufio"
	"io"
	"sync"
	"time"
)

// logOutput is where the JSON logs go: lines from every writer (the slog
// handler, the access log) are serialized and buffered, and written out
// at most every flushEvery, when the buffer fills, and at Close. A busy
// server then pays one write(2) per batch instead of one per request; a
// crash loses at most flushEvery of lines.
type logOutput struct {
	mu   sync.Mutex
	w    *bufio.Writer
	stop chan struct{}
	done chan struct{}
}

const flushEvery = 100 * time.Millisecond

func newLogOutput(w io.Writer) *logOutput {
	o := &logOutput{w: bufio.NewWriterSize(w, 64<<10), stop: make(chan struct{}), done: make(chan struct{})}
	// Ends when Close closes stop.
	go func() {
		defer close(o.done)
		t := time.NewTicker(flushEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				o.Flush()
			case <-o.stop:
				return
			}
		}
	}()
	return o
}

// Write buffers p; a line is written whole (callers write one line per call).
func (o *logOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.w.Write(p)
}

// Flush writes out what is buffered.
func (o *logOutput) Flush() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.w.Flush()
}

// Close stops the periodic flush and flushes what is left.
func (o *logOutput) Close() error {
	close(o.stop)
	<-o.done
	return o.Flush()
}
