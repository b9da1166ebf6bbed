package server

import (
	"net/http"
	"strings"
)

// options answers OPTIONS requests that are not CORS preflights with 204 and
// the Allow header, on every path the server serves and on "/". Load
// balancers' default health checks (HAProxy's "option httpchk" sends
// "OPTIONS / HTTP/1.0") then see a live server rather than a 404 that marks
// every replica down. Preflights (they carry Access-Control-Request-Method)
// pass on to the CORS handling. Readiness is /readyz: point real health
// checks there.
func (s *Server) options(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") != "" {
			next.ServeHTTP(w, r)
			return
		}
		allowed := s.allow.methods(r.URL.Path)
		if allowed == "" && r.URL.Path != "/" {
			next.ServeHTTP(w, r)
			return
		}
		if !strings.Contains(allowed, http.MethodOptions) {
			allowed = strings.TrimPrefix(allowed+", "+http.MethodOptions, ", ")
		}
		w.Header().Set("Allow", allowed)
		w.WriteHeader(http.StatusNoContent)
	})
}
