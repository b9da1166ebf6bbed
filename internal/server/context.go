package server

import "context"

// contextKey is the type of this package's context keys. An unexported type
// makes collisions with other packages' keys impossible.
type contextKey int

const (
	requestIDKey contextKey = iota
	tenantKey
	requestInfoKey
	openAIShapeKey
)

// RequestID returns the id of the request ctx belongs to ("" outside a request).
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// Tenant returns the tenant an authenticated /v1 request acts for ("" outside one).
func Tenant(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey).(string)
	return t
}

// withRequestID returns ctx carrying the request id.
func withRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey, id)
}

// withTenant returns ctx carrying the tenant, and notes it for the access log.
func withTenant(ctx context.Context, tenant string) context.Context {
	if info, ok := ctx.Value(requestInfoKey).(*requestInfo); ok {
		info.tenant = tenant
	}
	return context.WithValue(ctx, tenantKey, tenant)
}

// requestInfo is what inner handlers report back to the observe middleware.
// Context values flow inwards only, so observe puts a pointer in the context
// and reads it once the handler returns; one request's handlers run on one
// goroutine at a time, so it needs no lock.
type requestInfo struct {
	tenant string
	// unmatched is set when no route matched (404 or 405 from the router):
	// the metrics then use one route label for all of them, so that scanners
	// probing random paths cannot grow the label set.
	unmatched bool
	// longLived is set by SSE streams and long polls: their duration is how
	// long a client chose to wait, not how fast the server answered, so they
	// stay out of the request duration histogram.
	longLived bool
	// chatID is the chat a request created (POST /v1/chats), for the access
	// log; routes with {id} name theirs in the path.
	chatID string
	// traceID is the request's trace, when tracing is on, for the access log.
	traceID string
}

// infoOf returns the request's requestInfo, nil outside observe.
func infoOf(ctx context.Context) *requestInfo {
	info, _ := ctx.Value(requestInfoKey).(*requestInfo)
	return info
}

// markLongLived records that the request is an SSE stream or a long poll.
func markLongLived(ctx context.Context) {
	if info, ok := ctx.Value(requestInfoKey).(*requestInfo); ok {
		info.longLived = true
	}
}

// noteChat records the chat a request created, for the access log.
func noteChat(ctx context.Context, id string) {
	if info, ok := ctx.Value(requestInfoKey).(*requestInfo); ok {
		info.chatID = id
	}
}

// markUnmatched records that the router found no route for the request.
func markUnmatched(ctx context.Context) {
	if info, ok := ctx.Value(requestInfoKey).(*requestInfo); ok {
		info.unmatched = true
	}
}
