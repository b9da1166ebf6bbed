package server

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/agentd/agentd/internal/a2a"
)

// The standard agent protocols: saved teams served as agents. The
// protocols themselves are in their own packages; this file routes them
// behind the same rate limits, stream caps and bearer keys as /v1.

// a2aPrefix starts every A2A route.
const a2aPrefix = "/a2a/"

// mcpPath is the MCP server's endpoint.
const mcpPath = "/mcp"

// agentRoutes mounts the A2A and MCP routes.
func (s *Server) agentRoutes(r chi.Router) {
	r.Group(func(r chi.Router) {
		r.Use(s.limit, s.authenticate)
		// Streamable HTTP: POST carries requests (answered as a stream
		// while a team runs), GET the session's stream of notifications,
		// DELETE ends the session. All of them may last.
		serve := func(w http.ResponseWriter, r *http.Request) {
			markLongLived(r.Context())
			s.mcp.ServeHTTP(w, r, Tenant(r.Context()))
		}
		r.Post(mcpPath, serve)
		r.Get(mcpPath, serve)
		r.Delete(mcpPath, serve)
	})
	r.Route("/a2a/{team}", func(r chi.Router) {
		r.Use(s.limit, s.authenticate)
		r.Get("/.well-known/agent-card.json", func(w http.ResponseWriter, r *http.Request) {
			team := chi.URLParam(r, "team")
			card, err := s.a2a.Card(r.Context(), Tenant(r.Context()), team, a2a.EndpointURL(r, team))
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			s.writeJSON(w, r, http.StatusOK, card)
		})
		r.Post("/", func(w http.ResponseWriter, r *http.Request) {
			// A call may wait for a run (a blocking send) or stream it: its
			// time is the client's choice, not the server's speed.
			markLongLived(r.Context())
			s.a2a.ServeRPC(w, r, Tenant(r.Context()), chi.URLParam(r, "team"))
		})
	})
}

// newA2A is the A2A handler of a server.
func newA2A(cfg Config, chats Chats, s *Server) (*a2a.Handler, error) {
	return a2a.New(a2a.Config{MaxBodyBytes: cfg.MaxBodyBytes, Heartbeat: cfg.Heartbeat, AuthRequired: len(cfg.APIKeys) > 0},
		chats, s.logger, s.reg)
}

// agentCall reports whether a request is a call of an agent protocol,
// which may hold its connection as long as a run takes.
func agentCall(r *http.Request) bool {
	switch {
	case r.URL.Path == mcpPath:
		return r.Method == http.MethodPost || r.Method == http.MethodGet
	default:
		return r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, a2aPrefix)
	}
}
