// Package frontend holds what agentd's protocol front-ends (internal/a2a,
// internal/mcpserver, internal/agui, internal/openaiapi) share, so that
// each states it once rather than carrying its own copy: the settings the
// server hands a front-end that follows runs, the capped read of a request
// body, and the registration of a front-end's metrics.
//
// It holds no protocol: each front-end keeps its own defaults (a run wait
// that suits its clients) and answers a failed read in its own error shape
// (problem+json, a JSON-RPC error, the OpenAI error object).
package frontend

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Settings configures a front-end that runs a saved team for a request and
// follows the run (internal/agui, internal/openaiapi).
type Settings struct {
	// MaxBodyBytes caps request bodies.
	MaxBodyBytes int64
	// RunWait is how long a request or stream follows its run before it
	// answers that the run goes on without it.
	RunWait time.Duration
	// Heartbeat is the interval of SSE comments while a stream waits.
	Heartbeat time.Duration
	// Fail answers a request with an error the front-end does not answer
	// in its own shape: the server maps it to a status and writes it,
	// logging what needs logging.
	Fail func(w http.ResponseWriter, r *http.Request, err error)
}

// WithDefaults returns s with each zero number taken from def, the
// front-end's own defaults. Fail has no default: it is required.
func (s Settings) WithDefaults(def Settings) Settings {
	s.MaxBodyBytes = cmp.Or(s.MaxBodyBytes, def.MaxBodyBytes)
	s.RunWait = cmp.Or(s.RunWait, def.RunWait)
	s.Heartbeat = cmp.Or(s.Heartbeat, def.Heartbeat)
	return s
}

// ReadBody reads a request body of at most limit bytes. A longer body is
// an *http.MaxBytesError (see TooLarge), which the server answers 413 and
// the JSON-RPC front-end names in its error; any other error is a body
// that could not be read, which each front-end answers in its own shape.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	// MaxBytesReader rather than a LimitReader: it tells a body over the
	// cap from one that ends at it, and closes the connection after
	// answering, so the rest of the body is not read for nothing.
	return io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
}

// TooLarge reports whether err is a body over its cap, as ReadBody
// returns it.
func TooLarge(err error) bool {
	var tooLarge *http.MaxBytesError
	return errors.As(err, &tooLarge)
}

// Register registers a front-end's collectors on reg. A front-end's
// metrics are made once per server, so any failure (a second server on
// the same registry) is an error naming the front-end, not a collector to
// share.
func Register(reg prometheus.Registerer, frontEnd string, cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register %s metrics: %w", frontEnd, err)
		}
	}
	return nil
}
