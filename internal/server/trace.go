package server

import (
	"cmp"
	"net/http"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracerName names this package's spans' instrumentation scope.
const tracerName = "github.com/agentd/agentd/internal/server"

// traced starts a server span per request, continuing the caller's trace
// when the request carries a W3C traceparent. The span is named after the
// route pattern once routing is done ("POST /v1/chats"), never the raw path.
func (s *Server) traced(next http.Handler) http.Handler {
	tracer := s.cfg.TracerProvider.Tracer(tracerName)
	prop := propagation.TraceContext{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
		defer span.End()
		rec, ok := w.(*responseRecorder)
		if !ok {
			rec = &responseRecorder{ResponseWriter: w}
			w = rec
		}
		info := infoOf(ctx)
		if sc := span.SpanContext(); sc.IsValid() && info != nil {
			info.traceID = sc.TraceID().String()
		}
		r = r.WithContext(ctx)
		next.ServeHTTP(w, r)
		if route := chi.RouteContext(r.Context()).RoutePattern(); route != "" {
			span.SetName(r.Method + " " + route)
			span.SetAttributes(attribute.String("http.route", route))
		}
		if id := chatIDOf(r); id != "" || (info != nil && info.chatID != "") {
			if info != nil {
				id = cmp.Or(info.chatID, id)
			}
			span.SetAttributes(attribute.String("chat_id", id))
		}
		status := rec.statusCode()
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	})
}
