package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/agentd/agentd/internal/openaiapi"
)

// The OpenAI-compatible API (docs/openai.md) is internal/openaiapi's; this
// file routes it under /openai/v1 behind the same rate limits, stream caps
// and bearer keys as /v1, and has every error of its requests written in
// the OpenAI API's error shape, the middleware's too (401, 429, 413),
// since that is what the OpenAI SDKs read.

// openAIPrefix starts every route of the OpenAI-compatible API.
const openAIPrefix = "/openai/v1/"

// openAIRoutes mounts the OpenAI-compatible API.
func (s *Server) openAIRoutes(r chi.Router) {
	r.Route("/openai/v1", func(r chi.Router) {
		r.Use(s.openAIShaped, s.limit, s.authenticate)
		r.Get("/models", func(w http.ResponseWriter, r *http.Request) {
			s.openai.Models(w, r, Tenant(r.Context()))
		})
		r.Post("/chat/completions", s.openAIRun(s.openai.ChatCompletions))
		r.Post("/responses", s.openAIRun(s.openai.Responses))
		r.Get("/responses/{id}", func(w http.ResponseWriter, r *http.Request) {
			s.openai.Response(w, r, Tenant(r.Context()), chi.URLParam(r, "id"))
		})
	})
}

// openAIRun serves a request that runs a team: it reads the
// Idempotency-Key as POST /v1/chats does, and the request lasts as long
// as its run (it is counted with the streams and long polls).
func (s *Server) openAIRun(serve func(w http.ResponseWriter, r *http.Request, tenant, key string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key, err := idempotencyKey(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		markLongLived(r.Context())
		serve(w, r, Tenant(r.Context()), key)
	}
}

// openAIShaped marks a request's errors to be written in the OpenAI API's
// shape.
func (s *Server) openAIShaped(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), openAIShapeKey, true)))
	})
}

// isOpenAIShaped reports whether a request's errors take the OpenAI shape.
func isOpenAIShaped(ctx context.Context) bool {
	v, _ := ctx.Value(openAIShapeKey).(bool)
	return v
}

// openAIError is the problem p (made of err) in the OpenAI API's shape:
// the problem's kind is the code, a validation problem (422 on /v1) is the
// API's 400, and the message lists every problem with its parameter.
func openAIError(err error, p problem) *openaiapi.Error {
	var oe *openaiapi.Error
	if errors.As(err, &oe) {
		return oe
	}
	status := p.Status
	if status == http.StatusUnprocessableEntity {
		status = http.StatusBadRequest
	}
	msg, param := p.Detail, ""
	for i, fe := range p.Errors {
		path := openAIParam(fe.Path)
		if i == 0 {
			param = path
		}
		msg += "; " + path + ": " + fe.Message
	}
	code := strings.ReplaceAll(strings.TrimPrefix(p.Type, problemTypePrefix), "-", "_")
	return openaiapi.NewError(status, code, param, msg)
}

// openAIParam writes a JSON pointer as the API names parameters:
// /messages/3/content is messages[3].content.
func openAIParam(pointer string) string {
	if !strings.HasPrefix(pointer, "/") {
		return pointer
	}
	var b strings.Builder
	for i, seg := range strings.Split(pointer[1:], "/") {
		seg = strings.NewReplacer("~1", "/", "~0", "~").Replace(seg)
		if _, err := strconv.Atoi(seg); err == nil && i > 0 {
			b.WriteString("[" + seg + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return b.String()
}
