package mongo

import (
	"context"
	"sync"

	"go.mongodb.org/mongo-driver/v2/event"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TraceMonitor returns a command monitor that records every command the
// driver sends as a client span under the caller's span: main sets it
// on the client's options when tracing. (go.opentelemetry.io/contrib has
// no instrumentation for driver v2.) Spans name the command and the
// collection, never the command's content.
func TraceMonitor(tp trace.TracerProvider) *event.CommandMonitor {
	t := tp.Tracer("github.com/prodapi/prodapi/sources/mongo")
	type id struct {
		conn string
		req  int64
	}
	var spans sync.Map // id → trace.Span
	end := func(conn string, req int64, err error) {
		v, ok := spans.LoadAndDelete(id{conn, req})
		if !ok {
			return
		}
		span := v.(trace.Span)
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "")
		}
		span.End()
	}
	return &event.CommandMonitor{
		Started: func(ctx context.Context, e *event.CommandStartedEvent) {
			if !trace.SpanContextFromContext(ctx).IsValid() {
				return // not part of a traced request (pool upkeep, handshakes)
			}
			attrs := []attribute.KeyValue{
				attribute.String("db.system.name", "mongodb"),
				attribute.String("db.operation.name", e.CommandName),
				attribute.String("db.namespace", e.DatabaseName),
			}
			name := e.CommandName
			if v, err := e.Command.IndexErr(0); err == nil {
				if coll, ok := v.Value().StringValueOK(); ok {
					attrs = append(attrs, attribute.String("db.collection.name", coll))
					name += " " + coll
				}
			}
			_, span := t.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
			spans.Store(id{e.ConnectionID, e.RequestID}, span)
		},
		Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
			end(e.ConnectionID, e.RequestID, nil)
		},
		Failed: func(_ context.Context, e *event.CommandFailedEvent) {
			end(e.ConnectionID, e.RequestID, e.Failure)
		},
	}
}
