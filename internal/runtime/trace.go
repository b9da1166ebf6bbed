package runtime

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// tracerName names this package's spans' instrumentation scope.
const tracerName = "github.com/agentd/agentd/internal/chat"

// traceParents remembers, per chat, the span of the request that made the
// chat runnable (its create, or the input that resumed it), so that the
// worker's run joins that request's trace: one trace then tells a chat's
// story from POST /v1/chats to its last append. It is memory only, a
// best effort: a chat continued on another replica, or after a restart,
// starts a trace of its own. Entries a worker did not pick up are dropped
// after traceParentTTL.
type traceParents struct {
	on bool // tracing is on; off, nothing is remembered
	mu sync.Mutex
	m  map[string]traceParent
}

type traceParent struct {
	sc trace.SpanContext
	at time.Time
}

const traceParentTTL = time.Minute

func newTraceParents(tp trace.TracerProvider) (trace.Tracer, *traceParents) {
	if tp == nil {
		return noop.NewTracerProvider().Tracer(tracerName), &traceParents{}
	}
	return tp.Tracer(tracerName), &traceParents{on: true, m: map[string]traceParent{}}
}

// remember notes the span of ctx as the parent of the chat's next run.
func (p *traceParents) remember(ctx context.Context, chatID string, now time.Time) {
	sc := trace.SpanContextFromContext(ctx)
	if !p.on || !sc.IsValid() {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, e := range p.m {
		if now.Sub(e.at) > traceParentTTL {
			delete(p.m, id)
		}
	}
	p.m[chatID] = traceParent{sc: sc, at: now}
}

// take returns ctx carrying the chat's remembered parent span, if any.
func (p *traceParents) take(ctx context.Context, chatID string) context.Context {
	if !p.on {
		return ctx
	}
	p.mu.Lock()
	e, ok := p.m[chatID]
	delete(p.m, chatID)
	p.mu.Unlock()
	if !ok {
		return ctx
	}
	return trace.ContextWithSpanContext(ctx, e.sc)
}

// endSpan ends span, marking it failed when err is not nil.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// chatAttr is the chat_id span attribute.
func chatAttr(id string) attribute.KeyValue { return attribute.String("chat_id", id) }
