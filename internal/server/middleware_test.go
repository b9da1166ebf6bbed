package server

import (
	"log/slog"
	"net/http"
	"testing"
)

// The access line's level: writes, failures and streams at INFO; probes and
// successful reads (polls) at DEBUG.
func TestAccessLevel(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		method, route string
		status        int
		stream        bool
		want          slog.Level
	}{
		{http.MethodGet, "/healthz", 200, false, slog.LevelDebug},
		{http.MethodGet, "/readyz", 503, false, slog.LevelDebug},
		{http.MethodGet, "/metrics", 200, false, slog.LevelDebug},
		{http.MethodGet, "/v1/chats", 200, false, slog.LevelDebug},
		{http.MethodGet, "/v1/chats/{id}", 200, false, slog.LevelDebug},
		{http.MethodGet, "/v1/chats/{id}", 304, false, slog.LevelDebug},
		{http.MethodHead, "/v1/chats/{id}", 200, false, slog.LevelDebug},
		{http.MethodOptions, "/v1/chats", 204, false, slog.LevelDebug},
		{http.MethodGet, "/console/app.js", 200, false, slog.LevelDebug},
		{http.MethodGet, "/v1/chats/{id}", 404, false, slog.LevelInfo},
		{http.MethodGet, "/v1/chats", 401, false, slog.LevelInfo},
		{http.MethodGet, "/v1/chats", 500, false, slog.LevelInfo},
		{http.MethodGet, "/v1/chats/{id}/events", 200, true, slog.LevelInfo},
		{http.MethodPost, "/v1/chats", 201, false, slog.LevelInfo},
		{http.MethodPost, "/v1/chats/{id}/cancel", 202, false, slog.LevelInfo},
		{http.MethodPut, "/v1/teams/{name}", 201, false, slog.LevelInfo},
		{http.MethodDelete, "/v1/chats/{id}", 204, false, slog.LevelInfo},
		{http.MethodPatch, "/v1/chats/{id}", 200, false, slog.LevelInfo},
	} {
		if got := accessLevel(c.method, c.route, c.status, c.stream); got != c.want {
			t.Errorf("%s %s %d (stream %v): %v, want %v", c.method, c.route, c.status, c.stream, got, c.want)
		}
	}
}
