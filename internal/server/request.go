package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/agentd/agentd/internal/api"
	specproblem "github.com/agentd/agentd/internal/spec/problem"
)

// idempotencyKeyHeader names the header that makes POST /v1/chats retryable.
const idempotencyKeyHeader = "Idempotency-Key"

// maxIdempotencyKeyLen bounds the key: it is stored with the chat and is part
// of a unique index.
const maxIdempotencyKeyLen = 255

// readBody reads a request body of at most max bytes. A larger body is an
// *http.MaxBytesError, which the error mapping answers with 413.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	if r.ContentLength > max {
		// Refuse before reading: the client announced too much.
		return nil, &http.MaxBytesError{Limit: max}
	}
	// A body whose length is announced is read into one buffer of that
	// size (and the room ReadFrom wants to see the end), not grown by
	// doubling from 512 bytes as io.ReadAll does.
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, max))
	b := buf.Bytes()
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, err
		}
		return nil, badRequest(fmt.Sprintf("reading the request body: %v", err))
	}
	return b, nil
}

// checkOneJSONValue reports, as a 400, a body that is not exactly one
// well-formed JSON value. What the value must contain is the business of
// whoever decodes it (a bad spec is a 422, not a 400).
func checkOneJSONValue(b []byte) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return badRequest("the request body is empty; it must be a JSON value")
	}
	if json.Valid(b) {
		return nil
	}
	// Decode once more to say where it went wrong.
	dec := json.NewDecoder(bytes.NewReader(b))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		return badRequest(fmt.Sprintf("the request body is not valid JSON: %v", describeJSONError(b, err)))
	}
	return badRequest("the request body must hold exactly one JSON value")
}

// decodeStrict decodes a body holding exactly one JSON value into v,
// rejecting unknown fields, so a client's typo is an error and not a
// silently ignored option.
func decodeStrict(b []byte, v any) error {
	if err := checkOneJSONValue(b); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest(fmt.Sprintf("the request body does not match the expected object: %v", describeJSONError(b, err)))
	}
	return nil
}

// describeJSONError turns encoding/json errors about body into text that
// says where the problem is (a field, or a line and column) without naming
// Go types.
func describeJSONError(b []byte, err error) string {
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "the body"
		}
		return fmt.Sprintf("%s must be %s, not %s", field, jsonKind(typ.Type.Kind()), typ.Value)
	default:
		return specproblem.DescribeJSONError(b, err)
	}
}

// jsonKind names a Go kind the way a JSON client thinks of it.
func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "a number"
	default:
		return "another JSON type"
	}
}

// chatIDParam returns the {id} of a chat route. Only a canonical UUID can
// name a chat, so anything else is answered 404 without asking the store
// (which might otherwise fail on a malformed uuid with a 500).
func chatIDParam(r *http.Request) (string, error) {
	raw := chi.URLParam(r, "id")
	// uuid.Parse also takes {braced}, urn: and unhyphenated forms; the API
	// only ever hands out the canonical 36-character one.
	if len(raw) != 36 {
		return "", errChatNotFound
	}
	id, err := uuid.Parse(raw)
	if err != nil {
		return "", errChatNotFound
	}
	return id.String(), nil
}

// errChatNotFound answers a path that cannot name a chat, exactly like an
// unknown chat, so the two cannot be told apart.
var errChatNotFound = &requestError{status: http.StatusNotFound, kind: kindNotFound, detail: "chat not found"}

// idempotencyKey returns the request's Idempotency-Key ("" if none).
func idempotencyKey(r *http.Request) (string, error) {
	key := r.Header.Get(idempotencyKeyHeader)
	if len(key) > maxIdempotencyKeyLen {
		return "", badRequest("invalid Idempotency-Key header",
			api.ProblemField{Path: idempotencyKeyHeader, Message: fmt.Sprintf("must be at most %d characters", maxIdempotencyKeyLen)})
	}
	for i := range len(key) {
		if key[i] < ' ' || key[i] > '~' {
			return "", badRequest("invalid Idempotency-Key header",
				api.ProblemField{Path: idempotencyKeyHeader, Message: "must be printable ASCII"})
		}
	}
	return key, nil
}

// queryParser reads query parameters and collects every problem, so that a
// client learns about all of them in one 400.
type queryParser struct {
	q        url.Values
	problems []api.ProblemField
}

// newQueryParser parses r's query.
func newQueryParser(r *http.Request) *queryParser {
	return &queryParser{q: r.URL.Query()}
}

// problem records that parameter name is wrong.
func (p *queryParser) problem(name, msg string) {
	p.problems = append(p.problems, api.ProblemField{Path: name, Message: msg})
}

// int returns parameter name as an integer in [min, max], or def when absent.
func (p *queryParser) int(name string, def, min, max int64) int64 {
	s := p.q.Get(name)
	if s == "" {
		return def
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		p.problem(name, "must be an integer")
		return def
	}
	if n < min || n > max {
		p.problem(name, fmt.Sprintf("must be between %d and %d", min, max))
		return def
	}
	return n
}

// seq returns a sequence-number parameter (a seq to read after), 0 when absent.
func (p *queryParser) seq(name string) int64 {
	s := p.q.Get(name)
	if s == "" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		p.problem(name, "must be a non-negative integer")
		return 0
	}
	return n
}

// bool returns a boolean parameter: true or false, false when absent.
func (p *queryParser) bool(name string) bool {
	switch p.q.Get(name) {
	case "", "false":
		return false
	case "true":
		return true
	}
	p.problem(name, "must be true or false")
	return false
}

// wait returns the wait_s parameter as a duration, clamped to max: asking
// for a longer wait is not an error, the answer just comes sooner.
func (p *queryParser) wait(max time.Duration) time.Duration {
	s := p.q.Get("wait_s")
	if s == "" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		p.problem("wait_s", "must be a non-negative integer (seconds)")
		return 0
	}
	if n > int64(max/time.Second) {
		return max
	}
	return time.Duration(n) * time.Second
}

// err returns the collected problems as one 400, or nil.
func (p *queryParser) err() error {
	if len(p.problems) == 0 {
		return nil
	}
	return badRequest("invalid query parameters", p.problems...)
}
