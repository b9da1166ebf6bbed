package server

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/agentd/agentd/internal/console"
)

// consoleRoutes serves the web console: its page at / and its files (and the
// example specs) at /console/{file}; and the API reference page at /docs. They are static and public; everything
// the console shows it reads through the authenticated /v1 API.
func (s *Server) consoleRoutes(r chi.Router) {
	r.Get("/", s.console.ServeIndex)
	r.Get("/docs", s.console.ServeDocs)
	r.Get("/console/{file}", func(w http.ResponseWriter, r *http.Request) {
		if !s.console.ServeAsset(w, r, chi.URLParam(r, "file")) {
			s.notFound(w, r)
		}
	})
}

// newConsole loads the console for New.
func newConsole() (*console.Console, error) { return console.New() }
