package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/api"
	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
)

func TestProblemFor(t *testing.T) {
	t.Parallel()
	validation := &spec.ValidationError{Problems: []spec.Problem{
		{Path: "/agents/1/model", Message: `model "gtp" is not defined`},
		{Path: "/max_round", Message: "must be at least 1"},
	}}
	tests := []struct {
		name     string
		err      error
		status   int
		kind     string
		detail   string // substring; "" skips the check
		problems []api.ProblemField
	}{
		{"not found", chat.ErrNotFound, http.StatusNotFound, kindNotFound, "chat not found", nil},
		{"wrapped not found", fmt.Errorf("get chat x: %w", chat.ErrNotFound), http.StatusNotFound, kindNotFound, "chat not found", nil},
		{"conflict", fmt.Errorf("create chat: %w", chat.ErrConflict), http.StatusConflict, kindConflict, "Idempotency-Key", nil},
		{"invalid cursor", fmt.Errorf("list chats: %w", chat.ErrInvalidCursor), http.StatusBadRequest, kindMalformedRequest, "cursor",
			[]api.ProblemField{{Path: "cursor", Message: "is not a cursor this server issued; use next_cursor of a previous page"}}},
		{"chat not ended", fmt.Errorf("erase chat x: %w", chat.ErrChatActive), http.StatusConflict, kindChatNotEnded, "cancel it", nil},
		{"run active", fmt.Errorf("patch chat x: %w", chat.ErrRunActive), http.StatusConflict, kindRunActive, "change between runs", nil},
		{"team not found", fmt.Errorf("get team x: %w", chat.ErrTeamNotFound), http.StatusNotFound, kindTeamNotFound, "team not found", nil},
		{"no pending input", chat.ErrNoPendingInput, http.StatusConflict, kindNoPendingInput, "request_id", nil},
		{"validation", fmt.Errorf("create: %w", validation), http.StatusUnprocessableEntity, kindValidation, "2 problem(s)", []api.ProblemField{
			{Path: "/agents/1/model", Message: `model "gtp" is not defined`},
			{Path: "/max_round", Message: "must be at least 1"},
		}},
		{"too large", &http.MaxBytesError{Limit: 1024}, http.StatusRequestEntityTooLarge, kindBodyTooLarge, "1024 bytes", nil},
		{"wrapped too large", fmt.Errorf("read: %w", &http.MaxBytesError{Limit: 7}), http.StatusRequestEntityTooLarge, kindBodyTooLarge, "7 bytes", nil},
		{"malformed", badRequest("the request body is not valid JSON"), http.StatusBadRequest, kindMalformedRequest, "not valid JSON", nil},
		{"bad query", badRequest("invalid query parameters", api.ProblemField{Path: "limit", Message: "must be an integer"}),
			http.StatusBadRequest, kindMalformedRequest, "query", []api.ProblemField{{Path: "limit", Message: "must be an integer"}}},
		{"unauthorized", &requestError{status: http.StatusUnauthorized, kind: kindUnauthorized, detail: "no key"}, http.StatusUnauthorized, kindUnauthorized, "no key", nil},
		{"not ready", errNotReady, http.StatusServiceUnavailable, kindNotReady, "not ready", nil},
		{"store unavailable", fmt.Errorf("get chat x: %w: dial tcp 10.0.0.7:5432 user=agentd: connection refused", chat.ErrUnavailable),
			http.StatusServiceUnavailable, kindUnavailable, "temporarily unavailable", nil},
		{"fenced is internal", chat.ErrFenced, http.StatusInternalServerError, kindInternal, "internal error", nil},
		{"anything else", errors.New("pq: relation chats does not exist"), http.StatusInternalServerError, kindInternal, "internal error", nil},
		{"cancelled", context.Canceled, http.StatusInternalServerError, kindInternal, "internal error", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := problemFor(tt.err)
			if p.Status != tt.status {
				t.Errorf("status = %d, want %d", p.Status, tt.status)
			}
			if p.Type != problemTypePrefix+tt.kind {
				t.Errorf("type = %q, want %q", p.Type, problemTypePrefix+tt.kind)
			}
			if p.Title != http.StatusText(tt.status) {
				t.Errorf("title = %q, want %q", p.Title, http.StatusText(tt.status))
			}
			if !strings.Contains(p.Detail, tt.detail) {
				t.Errorf("detail = %q, want it to contain %q", p.Detail, tt.detail)
			}
			want := tt.problems
			if want == nil {
				want = []api.ProblemField{}
			}
			if !reflect.DeepEqual(p.Errors, want) {
				t.Errorf("errors = %+v, want %+v", p.Errors, want)
			}
			if strings.Contains(p.Detail, "10.0.0.7") || strings.Contains(p.Detail, "user=") {
				t.Errorf("detail %q names the database", p.Detail)
			}
			if (p.retryAfter > 0) != (tt.kind == kindUnavailable) {
				t.Errorf("retryAfter = %d for %s", p.retryAfter, tt.kind)
			}
			if tt.status == http.StatusInternalServerError && p.Detail != "internal error" {
				t.Errorf("a 500 leaks detail %q", p.Detail)
			}
		})
	}
}

// Every documented problem type is one the server can produce, and back.
func TestProblemKindsDocumented(t *testing.T) {
	t.Parallel()
	doc := string(openAPIDoc(t))
	for _, kind := range []string{kindMalformedRequest, kindUnauthorized, kindNotFound, kindMethodNotAllowed, kindConflict,
		kindNoPendingInput, kindBodyTooLarge, kindValidation, kindNotReady, kindUnavailable, kindInternal} {
		if !strings.Contains(doc, "- "+problemTypePrefix+kind+"\n") {
			t.Errorf("problem type %s%s is not in the Problem.type enum of api/openapi.yaml", problemTypePrefix, kind)
		}
	}
}
