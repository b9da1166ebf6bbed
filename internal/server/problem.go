package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/agentd/agentd/internal/api"
	"github.com/agentd/agentd/internal/runtime"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/openaiapi"
	"github.com/agentd/agentd/internal/spec"
)

// problemContentType is the media type of RFC 9457 error bodies.
const problemContentType = "application/problem+json"

// problemTypePrefix prefixes every problem type URI. The types are URNs, not
// links: they are stable identifiers a client can switch on (two different
// 409s, for example), and they promise no documentation page at a URL.
const problemTypePrefix = "urn:agentd:problem:"

// Problem kinds: the last part of a problem's type URI. They are part of the
// public API (see components/schemas/Problem in api/openapi.yaml).
const (
	kindMalformedRequest = "malformed-request"
	kindUnauthorized     = "unauthorized"
	kindNotFound         = "not-found"
	kindMethodNotAllowed = "method-not-allowed"
	kindConflict         = "conflict"
	kindNoPendingInput   = "no-pending-input"
	kindRunActive        = "run-active"
	kindBodyTooLarge     = "body-too-large"
	kindValidation       = "validation-failed"
	kindNotReady         = "not-ready"
	kindUnavailable      = "unavailable"
	kindInternal         = "internal"
)

// problem is an RFC 9457 problem details body, and its Retry-After.
type problem struct {
	api.Problem
	// retryAfter, when positive, is sent as the Retry-After header (seconds).
	retryAfter int
}

// unavailableRetryAfter is the Retry-After of answers given while the
// database is unreachable: long enough not to hammer a recovering database,
// short enough that clients notice it is back soon after it is.
const unavailableRetryAfter = 5

// requestError is an error the HTTP layer itself finds in a request (a
// malformed body, a bad query parameter, a missing key, an unknown route).
type requestError struct {
	status   int
	kind     string
	detail   string
	problems []api.ProblemField
}

// Error describes the problem for logs; clients get the problem body instead.
func (e *requestError) Error() string {
	msg := fmt.Sprintf("%d %s: %s", e.status, e.kind, e.detail)
	for _, p := range e.problems {
		msg += fmt.Sprintf("; %s: %s", p.Path, p.Message)
	}
	return msg
}

// badRequest returns a 400 requestError.
func badRequest(detail string, problems ...api.ProblemField) *requestError {
	return &requestError{status: http.StatusBadRequest, kind: kindMalformedRequest, detail: detail, problems: problems}
}

// errNotReady answers /readyz while the server is not ready.
var errNotReady = &requestError{status: http.StatusServiceUnavailable, kind: kindNotReady,
	detail: "the server is shutting down or not ready to accept work"}

// problemFor is the one place that decides which HTTP status and problem an
// error becomes. Every handler error goes through it (via writeError), so
// the mapping is tested once, in a table, and a new sentinel error cannot
// silently produce a different status on one route than on another.
//
// Anything it does not recognise is a 500 whose detail says only "internal
// error": the real error may name tables, hosts or files, and belongs in the
// log, not in a response.
func problemFor(err error) problem {
	var (
		reqErr   *requestError
		valErr   *spec.ValidationError
		tooLarge *http.MaxBytesError
		busy     *chat.BusyError
	)
	switch {
	case errors.As(err, &reqErr):
		return newProblem(reqErr.status, reqErr.kind, reqErr.detail, reqErr.problems)
	case errors.As(err, &valErr):
		problems := valErr.Problems // a spec.Problem is an api.ProblemField
		return newProblem(http.StatusUnprocessableEntity, kindValidation,
			fmt.Sprintf("the request is invalid: %d problem(s), see errors", len(problems)), problems)
	case errors.As(err, &tooLarge):
		return newProblem(http.StatusRequestEntityTooLarge, kindBodyTooLarge,
			fmt.Sprintf("the request body exceeds %d bytes", tooLarge.Limit), nil)
	case errors.Is(err, chat.ErrInvalidCursor):
		return newProblem(http.StatusBadRequest, kindMalformedRequest, "invalid cursor",
			[]api.ProblemField{{Path: "cursor", Message: "is not a cursor this server issued; use next_cursor of a previous page"}})
	case errors.Is(err, chat.ErrTeamNotFound):
		return newProblem(http.StatusNotFound, kindTeamNotFound, errTeamNotFoundDetail, nil)
	case errors.Is(err, chat.ErrNotFound):
		return newProblem(http.StatusNotFound, kindNotFound, "chat not found", nil)
	case errors.Is(err, chat.ErrChatActive):
		return newProblem(http.StatusConflict, kindChatNotEnded,
			"the chat has not ended: cancel it (POST /v1/chats/{id}/cancel) and erase it once it has", nil)
	case errors.Is(err, chat.ErrRunActive):
		return newProblem(http.StatusConflict, kindRunActive,
			"a run of the chat is active or about to start: its context variables change between runs (a run's own context_variables merge at its start)", nil)
	case errors.Is(err, chat.ErrNoPendingInput):
		return newProblem(http.StatusConflict, kindNoPendingInput,
			"the chat is not waiting for input, or the request_id is not the pending one", nil)
	case errors.Is(err, chat.ErrUnavailable):
		// The store's error names the database host, port and user: it goes
		// to the log, the client learns only that it may retry.
		p := newProblem(http.StatusServiceUnavailable, kindUnavailable,
			"the service is temporarily unavailable; retry after the Retry-After seconds", nil)
		p.retryAfter = unavailableRetryAfter
		return p
	case errors.As(err, &busy):
		return newProblem(http.StatusConflict, kindRunActive,
			fmt.Sprintf("run %d of the chat is active or about to start: post with if_busy enqueue to run after it, or interrupt to cancel it", busy.Run), nil)
	case errors.Is(err, runtime.ErrLogBroken):
		return newProblem(http.StatusConflict, kindConflict, "the chat's log cannot be read, so the chat cannot be run again; fork it from an earlier seq", nil)
	case errors.Is(err, chat.ErrConflict):
		return newProblem(http.StatusConflict, kindConflict,
			"the request conflicts with an earlier one: the Idempotency-Key was used with a different body", nil)
	default:
		return newProblem(http.StatusInternalServerError, kindInternal, "internal error", nil)
	}
}

// newProblem fills in the parts every problem shares.
func newProblem(status int, kind, detail string, problems []api.ProblemField) problem {
	if problems == nil {
		problems = []api.ProblemField{}
	}
	return problem{Problem: api.Problem{Type: problemTypePrefix + kind, Title: http.StatusText(status), Status: status,
		Detail: detail, Errors: problems}}
}

// responder writes responses and errors; handlers of every resource share it.
type responder struct {
	logger *slog.Logger
}

// writeError answers a request with the problem for err. Server errors are
// logged with the real error and the request id, which is also in the
// response's X-Request-Id header, so a client's report can be matched to
// the log line.
func (rs responder) writeError(w http.ResponseWriter, r *http.Request, err error) {
	p := problemFor(err)
	if r.Context().Err() != nil {
		// The client is gone (or the server is shutting down): the error is
		// most likely the cancelled context itself and nobody reads the answer.
		rs.logger.Debug("request ended before a response", "request_id", RequestID(r.Context()), chatAttr(r), "error", err)
	} else if p.Status >= http.StatusInternalServerError && p.Status != http.StatusServiceUnavailable {
		rs.logger.Error("request failed", "request_id", RequestID(r.Context()), chatAttr(r),
			"method", r.Method, "path", r.URL.Path, "error", err)
	} else if p.retryAfter > 0 {
		rs.logger.Warn("request failed: store unavailable", "request_id", RequestID(r.Context()),
			"method", r.Method, "path", r.URL.Path, "error", err)
	}
	if isOpenAIShaped(r.Context()) {
		if p.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(p.retryAfter))
		}
		openaiapi.WriteError(w, openAIError(err, p))
		return
	}
	b, mErr := json.Marshal(p)
	if mErr != nil {
		// A problem holds only strings and ints; this cannot fail.
		panic(fmt.Sprintf("encode problem: %v", mErr))
	}
	w.Header().Set("Content-Type", problemContentType)
	if p.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(p.retryAfter))
	}
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(b, '\n'))
}

// writeJSON writes v as a JSON response. It encodes before writing anything,
// so that a value that cannot be encoded (only a bug, such as invalid raw
// JSON from the store) becomes a logged 500 instead of a truncated 200.
func (rs responder) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		rs.writeError(w, r, fmt.Errorf("encode %T response: %w", v, err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
