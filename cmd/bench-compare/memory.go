package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
)

// The memory phase's second figure: chats waiting in the middle of a
// streamed reply from a model on the OpenAI wire, which is what a chat on
// a hosted model waits on. A replay model's delay is waited out inside
// agentd, under fewer frames than an HTTP call's; this figure is what a
// replica of chats on real models holds.

// holdModel is the model stand-in: each reply's headers and first token
// are sent at once, and the rest is held until the call is cut.
type holdModel struct {
	srv *http.Server
	url string
}

// startHoldModel serves the stand-in (see serveModel).
func startHoldModel() (*holdModel, error) {
	m := &holdModel{}
	var err error
	m.srv, m.url, err = serveModel(http.HandlerFunc(m.serve))
	return m, err
}

func (m *holdModel) close() { _ = m.srv.Close() }

func (m *holdModel) serve(w http.ResponseWriter, r *http.Request) {
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	_, _ = fmt.Fprintf(w, scaleChunk, "tok0 ")
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
	<-r.Context().Done()
}

// modelMemoryPhase creates n chats on an agentd of its own, each in the
// middle of a streamed reply, and measures what they add to it once every
// one is waiting for its next token.
func modelMemoryPhase(ctx context.Context, pg *pgServer, bin, tmp string, cfg config, n int) (memory, error) {
	model, err := startHoldModel()
	if err != nil {
		return memory{}, err
	}
	defer model.close()
	models := filepath.Join(tmp, "memory-models.yaml")
	file := fmt.Appendf(nil, "endpoints:\n  - name: bench\n    kind: openai\n    base_url: %s\n    max_concurrency: %d\n    timeout_s: 3600\n", model.url, n)
	if cfg.scaleH2C {
		file = append(file, "    h2c: true\n"...)
	}
	if err := os.WriteFile(models, file, 0o600); err != nil {
		return memory{}, err
	}
	if _, err := pg.query(ctx, "postgres", `CREATE DATABASE agentd_memory`); err != nil {
		return memory{}, err
	}
	ag, err := startAgentd(ctx, bin, tmp, pg.url("agentd_memory"), cfg, "agentd-memory",
		"AGENTD_MODELS_FILE="+models, "AGENTD_MAX_ACTIVE_CHATS="+strconv.Itoa(n+100))
	if err != nil {
		return memory{}, err
	}
	defer ag.stop()
	spec := []byte(`{"name": "bench-memory", "task": "Write on.", "max_round": 3,
		"agents": [{"name": "writer", "type": "assistant", "model": {"provider": "openai", "model": "bench"}}]}`)
	f, err := ag.waitingFootprint(ctx, spec, n)
	return memory{chats: n, footprint: f, model: true, h2c: cfg.scaleH2C}, err
}
