package server

import (
	"net/http"

	"github.com/go-chi/chi/v5"
)

// AG-UI (docs/ag-ui.md) is internal/agui's; this file routes it at
// /ag-ui/{team} behind the same rate limits, stream caps and bearer keys
// as /v1. Its errors before a stream begins are problems, as on /v1: the
// AG-UI client raises any non-2xx answer with its body.

// aguiRoutes mounts AG-UI.
func (s *Server) aguiRoutes(r chi.Router) {
	r.Route("/ag-ui/{team}", func(r chi.Router) {
		r.Use(s.limit, s.authenticate)
		r.Post("/", func(w http.ResponseWriter, r *http.Request) {
			key, err := idempotencyKey(r)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			// A run streams for as long as the team takes: its time is
			// the team's, not the server's.
			markLongLived(r.Context())
			w, r = s.lasting(w, r)
			s.agui.Run(w, r, Tenant(r.Context()), chi.URLParam(r, "team"), key)
		})
	})
}
