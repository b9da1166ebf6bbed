package server

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

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
			w, r = s.lasting(w, r)
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
			w, r = s.lasting(w, r)
			s.a2a.ServeRPC(w, r, Tenant(r.Context()), chi.URLParam(r, "team"))
		})
	})
}

// lasting lets a call of an agent protocol last as long as the run it
// waits for or streams, past the server's read and write timeouts, which
// bound ordinary requests: once the body is read, the read deadline is
// lifted (net/http watches the connection with a read from then on, and
// that read failing at the deadline would cancel the call), and each
// write gets a deadline of its own, so a client that stops reading is
// still cut off.
func (s *Server) lasting(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request) {
	rc := http.NewResponseController(w)
	lift := func() { _ = rc.SetReadDeadline(time.Time{}) }
	if r.Body == nil || r.Body == http.NoBody {
		lift()
	} else {
		r.Body = &liftAtEOF{ReadCloser: r.Body, lift: lift}
	}
	return &deadlineWriter{ResponseWriter: w, rc: rc, timeout: s.cfg.StreamWriteTimeout}, r
}

// liftAtEOF calls lift once the body has been read to its end.
type liftAtEOF struct {
	io.ReadCloser
	lift func()
	once sync.Once
}

func (b *liftAtEOF) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.lift)
	}
	return n, err
}

// deadlineWriter gives each write (and flush) a write deadline of its own.
// The deadline is moved on once a tenth of it has passed, as SSE streams
// do, not before every write.
type deadlineWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	set     time.Time
}

func (d *deadlineWriter) extend() {
	if now := time.Now(); now.Sub(d.set) >= d.timeout/10 {
		d.set = now
		_ = d.rc.SetWriteDeadline(now.Add(d.timeout))
	}
}

// WriteHeader extends the deadline before the status line goes out.
func (d *deadlineWriter) WriteHeader(status int) {
	d.extend()
	d.ResponseWriter.WriteHeader(status)
}

// Write extends the deadline and writes.
func (d *deadlineWriter) Write(b []byte) (int, error) {
	d.extend()
	return d.ResponseWriter.Write(b)
}

// Flush extends the deadline and flushes (http.Flusher, for handlers that
// assert it).
func (d *deadlineWriter) Flush() {
	d.extend()
	_ = d.rc.Flush()
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (d *deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }

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
