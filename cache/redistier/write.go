package redistier

import (
	"context"
	"hash/maphash"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Writes leave the request path: they are queued, per key on one of
// writers goroutines (so the writes of one key keep their order), and
// dropped and counted when a queue is full.
const (
	writers     = 4
	writeQueues = 256 // each queue's length
)

// A writeQueue holds the writes not made yet, and the writers that make
// them.
type writeQueue struct {
	mu      sync.RWMutex // guards closed against sends on closed queues
	closed  bool
	queues  [writers]chan writeOp
	seed    maphash.Seed
	pending sync.WaitGroup // queued writes (Settle)
	drained chan struct{}  // closed when every writer has ended
	abort   chan struct{}  // closed when Close stops waiting for writes

	closeOnce, abortOnce sync.Once
}

type writeOp struct {
	key    string
	val    []byte // nil: delete the key
	ttl    time.Duration
	parent trace.SpanContext // the request's span, when tracing: the write's span goes under it
	// done, when set, is closed once the write was made or dropped.
	done chan struct{}
}

func (op writeOp) finish() {
	if op.done != nil {
		close(op.done)
	}
}

// Set queues the write of val under key, to live ttl, and returns at
// once; ctx only gives the write's span its parent. The write is dropped
// (and counted) when the tier is closed, the breaker is open or the
// key's queue is full.
func (t *Tier) Set(ctx context.Context, key string, val []byte, ttl time.Duration) {
	t.enqueue(writeOp{key: key, val: val, ttl: ttl, parent: t.spanOf(ctx)})
}

// SetAndWait is Set, and waits until the write was made or dropped, or
// ctx ended, or what was left of ctx's budget is spent (the write goes
// on). The write still goes through the key's queue, so that it keeps its
// order with the key's other writes.
func (t *Tier) SetAndWait(ctx context.Context, key string, val []byte, ttl time.Duration) {
	op := writeOp{key: key, val: val, ttl: ttl, parent: t.spanOf(ctx), done: make(chan struct{})}
	t.enqueue(op)
	if budgetOf(ctx) != nil {
		wait, ok := t.allot(ctx)
		if !ok {
			return
		}
		start := time.Now()
		defer t.spent(ctx, start, wait)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	select {
	case <-op.done:
	case <-ctx.Done():
	}
}

// Delete queues the deletion of key, as Set queues a write.
func (t *Tier) Delete(ctx context.Context, key string) {
	t.enqueue(writeOp{key: key, parent: t.spanOf(ctx)})
}

// start starts the writers. Each ends when Close closes its queue.
func (q *writeQueue) start(t *Tier) {
	q.seed = maphash.MakeSeed()
	q.abort, q.drained = make(chan struct{}), make(chan struct{})
	var writers sync.WaitGroup
	for i := range q.queues {
		q.queues[i] = make(chan writeOp, writeQueues)
		writers.Go(func() { t.writer(q.queues[i]) })
	}
	// Ends with the last writer.
	go func() {
		writers.Wait()
		close(q.drained)
	}()
}

// enqueue hands a write to its writer without waiting.
func (t *Tier) enqueue(op writeOp) {
	if t.rdb == nil {
		op.finish()
		return
	}
	if t.breaker.isOpen() {
		t.metrics.writesDropped.Inc("breaker_open")
		op.finish()
		return
	}
	q := &t.writes
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		t.metrics.writesDropped.Inc("closed")
		op.finish()
		return
	}
	ch := q.queues[maphash.String(q.seed, op.key)%writers]
	q.pending.Add(1)
	select {
	case ch <- op:
	default:
		q.pending.Done()
		t.metrics.writesDropped.Inc("queue_full")
		op.finish()
	}
}

// writer makes the writes of one queue. It ends when Close closes the
// queue and the queue is drained; after Close gives up waiting (abort),
// the rest is dropped.
func (t *Tier) writer(ch <-chan writeOp) {
	q := &t.writes
	for op := range ch {
		select {
		case <-q.abort:
			t.metrics.writesDropped.Inc("closed")
		default:
			t.write(op)
		}
		op.finish()
		q.pending.Done()
	}
}

func (t *Tier) write(op writeOp) {
	if !t.breaker.allow() {
		t.metrics.writesDropped.Inc("breaker_open")
		return
	}
	// Off the request path: a write may take as long as it takes to
	// tell a slow reply from a sick Redis.
	ctx, cancel := context.WithTimeout(context.Background(), t.sickAfter())
	defer cancel()
	var err error
	opName := "set"
	if op.parent.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, op.parent)
	}
	start := time.Now()
	if op.val == nil {
		opName = "del"
		sctx, span := t.span(ctx, "DEL")
		err = t.rdb.Del(sctx, op.key).Err()
		t.metrics.redisDel.Observe(time.Since(start).Seconds())
		endSpan(span, err)
	} else {
		sctx, span := t.span(ctx, "SET")
		err = t.rdb.Set(sctx, op.key, op.val, op.ttl).Err()
		t.metrics.redisSet.Observe(time.Since(start).Seconds())
		endSpan(span, err)
	}
	// A reply error (out of memory, read-only replica) means Redis is
	// there: it counts, but does not trip the breaker, so reads go on.
	t.breaker.done(healthy(err))
	if err != nil {
		t.metrics.redisErrors.Inc(opName)
		t.log.Debug("redistier: write failed", "op", opName, "error", err)
	}
}

// close closes the queues and waits for the writers to drain them until
// ctx ends; then the writers drop what is left.
func (q *writeQueue) close(ctx context.Context) error {
	q.closeOnce.Do(func() {
		q.mu.Lock()
		q.closed = true
		q.mu.Unlock()
		for _, ch := range q.queues {
			if ch != nil { // nil: never started, without Redis
				close(ch)
			}
		}
	})
	if q.drained == nil {
		return nil
	}
	select {
	case <-q.drained:
		return nil
	case <-ctx.Done():
		q.abortOnce.Do(func() { close(q.abort) })
		return ctx.Err()
	}
}
