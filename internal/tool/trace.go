package tool

import (
	"net/http"

	"go.opentelemetry.io/otel/propagation"
)

// tracerName names this package's spans' instrumentation scope.
const tracerName = "github.com/agentd/agentd/internal/tool"

// traceparent sends the W3C traceparent of the request's span with every
// request, so that a traced tool server joins the chat's trace. Without a
// span in the request's context it adds nothing.
type traceparent struct{ next http.RoundTripper }

// RoundTrip adds the header to a copy of req (a RoundTripper must not change
// the request it was given) and sends it.
func (t traceparent) RoundTrip(req *http.Request) (*http.Response, error) {
	h := make(http.Header, 1)
	propagation.TraceContext{}.Inject(req.Context(), propagation.HeaderCarrier(h))
	if len(h) == 0 {
		return t.next.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	for k, v := range h {
		req.Header[k] = v
	}
	return t.next.RoundTrip(req)
}
