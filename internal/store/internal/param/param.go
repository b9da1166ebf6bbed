// Package param checks and normalizes the arguments of chat.Store methods the
// same way for every driver, so that both stores reject the same calls with
// the same errors and page the same way.
package param

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/agentd/agentd/internal/chat"
)

// ErrInvalid marks a call whose arguments break the Store contract (a caller
// bug, not a database state); drivers wrap it with context.
var ErrInvalid = errors.New("invalid store call")

// Page sizes. The HTTP layer applies its own limits; these clamps only keep a
// caller bug from reading a whole table at once.
const (
	DefaultListChats  = 50
	MaxListChats      = 1000
	DefaultListEvents = 1000
	MaxListEvents     = 10000
)

// Limit returns n clamped to [1, max], with def for n <= 0.
func Limit(n, def, max int) int {
	switch {
	case n <= 0:
		return def
	case n > max:
		return max
	}
	return n
}

// ChatID returns the canonical (lower-case, hyphenated) form of a UUID chat id.
// ok is false when id is not a UUID; such a chat cannot exist, so lookups
// answer ErrNotFound without asking the database (Postgres would reject the
// text as a uuid with a driver error).
func ChatID(id string) (canonical string, ok bool) {
	if isCanonical(id) {
		return id, true // as almost every id is: spares a parse and a string
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return "", false
	}
	return u.String(), true
}

// isCanonical reports whether id is a UUID in canonical form: 36
// characters, lower-case hex digits with hyphens after the 8th, 12th,
// 16th and 20th.
func isCanonical(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i := range len(id) {
		c := id[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// UUID returns the 16 bytes of a chat id: what a uuid[] parameter takes
// in Postgres's binary format (pgx has no binary encoding of a string as a
// uuid, and falls back to text only after trying).
func UUID(id string) ([16]byte, bool) {
	u, err := uuid.Parse(id)
	return u, err == nil
}

// Time returns t in UTC, or now() when t is zero (the caller did not say).
func Time(t time.Time, now func() time.Time) time.Time {
	if t.IsZero() {
		return now().UTC()
	}
	return t.UTC()
}

// CheckCreate validates p and returns the canonical chat id.
func CheckCreate(p *chat.CreateChatParams) (string, error) {
	id, ok := ChatID(p.ID)
	if !ok {
		return "", fmt.Errorf("%w: chat id %q is not a UUID", ErrInvalid, p.ID)
	}
	if len(p.Spec) == 0 {
		return "", fmt.Errorf("%w: chat %s has no spec", ErrInvalid, id)
	}
	if len(p.Events) == 0 {
		return "", fmt.Errorf("%w: chat %s has no first events", ErrInvalid, id)
	}
	if err := checkEvents(id, 1, p.Events); err != nil {
		return "", err
	}
	if p.Keyed != nil && (p.State == nil || p.ForkedFrom == nil || p.Keyed.ChatID != p.ForkedFrom.ChatID) {
		return "", fmt.Errorf("%w: chat %s: only a fork is keyed, on the chat it is forked from", ErrInvalid, id)
	}
	return id, nil
}

// CheckAppend validates p and returns the canonical chat id. It checks what
// needs no database: the events are non-empty, belong to the chat and have
// consecutive seqs, and the update names a valid status.
func CheckAppend(p *chat.AppendParams) (string, error) {
	id, ok := ChatID(p.ChatID)
	if !ok {
		return "", fmt.Errorf("%w: chat id %q is not a UUID", ErrInvalid, p.ChatID)
	}
	if len(p.Events) == 0 {
		return "", fmt.Errorf("%w: append to chat %s without events", ErrInvalid, id)
	}
	if p.Events[0].Seq < 1 {
		return "", fmt.Errorf("%w: append to chat %s: first seq %d < 1", ErrInvalid, id, p.Events[0].Seq)
	}
	if !p.Update.Status.Valid() {
		return "", fmt.Errorf("%w: append to chat %s: status %q", ErrInvalid, id, p.Update.Status)
	}
	if err := checkEvents(id, p.Events[0].Seq, p.Events); err != nil {
		return "", err
	}
	if len(p.Deliveries) > 0 {
		if err := CheckDeliveries(p.Deliveries, p.Events); err != nil {
			return "", fmt.Errorf("append to chat %s: %w", id, err)
		}
	}
	for _, e := range p.Events {
		if n := EventBytes(e); n > MaxEventBytes {
			// The same on both stores, far below what either could hold: a
			// single event this large is a runaway reply, not a chat message.
			return "", fmt.Errorf("%w: event seq %d of chat %s is %d bytes, over the limit of %d", chat.ErrDataRejected, e.Seq, id, n, MaxEventBytes)
		}
	}
	return id, nil
}

// MaxEventBytes is the largest event an append may hold, counting its
// text and JSON values.
const MaxEventBytes = 8 << 20

// EventBytes is the size of an event's text and JSON values.
func EventBytes(e chat.Event) int {
	n := len(e.Role) + len(e.Name) + len(e.Content) + len(e.Data)
	for _, c := range e.ToolCalls {
		n += len(c.ID) + len(c.Type) + len(c.Function.Name) + len(c.Function.Arguments)
	}
	for _, r := range e.ToolResponses {
		n += len(r.ToolCallID) + len(r.Role) + len(r.Content)
	}
	return n
}

func checkEvents(id string, first int64, events []chat.Event) error {
	for i, e := range events {
		if want := first + int64(i); e.Seq != want {
			return fmt.Errorf("%w: chat %s: event %d has seq %d, want %d (seqs must be consecutive)", ErrInvalid, id, i, e.Seq, want)
		}
		if e.Type == "" {
			return fmt.Errorf("%w: chat %s: event seq %d has no type", ErrInvalid, id, e.Seq)
		}
		if e.ChatID != "" {
			if cid, ok := ChatID(e.ChatID); !ok || cid != id {
				return fmt.Errorf("%w: chat %s: event seq %d belongs to chat %q", ErrInvalid, id, e.Seq, e.ChatID)
			}
		}
	}
	return nil
}

// Text returns s as the stores keep text: valid UTF-8 without NUL bytes,
// each invalid byte sequence and each NUL replaced by U+FFFD. Postgres text
// and jsonb cannot hold either, and a tool's or a sandbox's output may
// contain both; refusing the append instead would leave the worker unable to
// record even the chat's failure. Clients lose nothing they could see: the
// JSON encoder turns invalid UTF-8 into U+FFFD anyway. Both stores apply
// this, so they keep the same text.
func Text(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// ToolCalls returns calls with Text applied to every string, sharing calls
// when nothing changes.
func ToolCalls(calls []chat.ToolCall) []chat.ToolCall {
	clean := func(c chat.ToolCall) bool {
		return Text(c.ID) == c.ID && Text(c.Type) == c.Type && Text(c.Function.Name) == c.Function.Name &&
			Text(c.Function.Arguments) == c.Function.Arguments
	}
	if all(calls, clean) {
		return calls
	}
	out := make([]chat.ToolCall, len(calls))
	for i, c := range calls {
		out[i] = chat.ToolCall{ID: Text(c.ID), Type: Text(c.Type),
			Function: chat.FunctionCall{Name: Text(c.Function.Name), Arguments: Text(c.Function.Arguments)}}
	}
	return out
}

// ToolResponses returns rs with Text applied to every string, sharing rs
// when nothing changes.
func ToolResponses(rs []chat.ToolResponse) []chat.ToolResponse {
	clean := func(r chat.ToolResponse) bool {
		return Text(r.ToolCallID) == r.ToolCallID && Text(r.Role) == r.Role && Text(r.Content) == r.Content
	}
	if all(rs, clean) {
		return rs
	}
	out := make([]chat.ToolResponse, len(rs))
	for i, r := range rs {
		out[i] = chat.ToolResponse{ToolCallID: Text(r.ToolCallID), Role: Text(r.Role), Content: Text(r.Content), IsError: r.IsError}
	}
	return out
}

func all[T any](xs []T, ok func(T) bool) bool {
	for _, x := range xs {
		if !ok(x) {
			return false
		}
	}
	return true
}

// MessageCount returns the number of message events.
func MessageCount(events []chat.Event) int {
	n := 0
	for _, e := range events {
		if e.Type == chat.EventMessage {
			n++
		}
	}
	return n
}

// Cursor is the position after which the next page of ListChats starts: the
// (created_at, id) of the last chat of the previous page. Pages are ordered by
// that pair, not by an offset, so chats created while a client pages do not
// shift or repeat entries.
type Cursor struct {
	CreatedAt time.Time
	ID        string
}

// EncodeCursor returns the opaque cursor that continues after c.
func EncodeCursor(c *chat.Chat) string {
	raw := strconv.FormatInt(c.CreatedAt.UnixNano(), 10) + "_" + c.ID
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// DecodeCursor parses a cursor from EncodeCursor. A cursor the store did not
// issue is a client error, chat.ErrInvalidCursor.
func DecodeCursor(s string) (Cursor, error) {
	bad := fmt.Errorf("cursor %q: %w", s, chat.ErrInvalidCursor)
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, bad
	}
	ns, id, ok := strings.Cut(string(raw), "_")
	if !ok {
		return Cursor{}, bad
	}
	n, err := strconv.ParseInt(ns, 10, 64)
	if err != nil {
		return Cursor{}, bad
	}
	cid, ok := ChatID(id)
	if !ok {
		return Cursor{}, bad
	}
	return Cursor{CreatedAt: time.Unix(0, n).UTC(), ID: cid}, nil
}

// PrepareAppend validates p and returns the copy that goes to a group
// committer: the canonical chat id (the committer sorts appends by it) and
// UpdatedAt set.
func PrepareAppend(p *chat.AppendParams, now func() time.Time) (*chat.AppendParams, error) {
	id, err := CheckAppend(p)
	if err != nil {
		return nil, fmt.Errorf("append to chat: %w", err)
	}
	q := *p
	q.ChatID = id
	q.Update.UpdatedAt = Time(p.Update.UpdatedAt, now)
	return &q, nil
}

// DescribeAppend names an append in error messages.
func DescribeAppend(p *chat.AppendParams) string {
	first := p.Events[0].Seq
	return fmt.Sprintf("append seq %d..%d to chat %s at epoch %d", first, first+int64(len(p.Events))-1, p.ChatID, p.Epoch)
}

// EventTypeFilter is the SQL condition ListEvents adds for ListEventsParams.Type:
// "" for every type, else " AND type = '<type>'". The type is written into
// the statement, not bound: both databases use a partial index (migration
// 0009, the context.updated events) only for a query whose condition names
// its type, and Postgres's generic plan of a bound type would not. So that
// nothing but a type gets in, a type is lower-case letters and dots.
func EventTypeFilter(t chat.EventType) (string, error) {
	if t == "" {
		return "", nil
	}
	for _, c := range t {
		if c != '.' && (c < 'a' || c > 'z') {
			return "", fmt.Errorf("%w: event type %q", ErrInvalid, t)
		}
	}
	return " AND type = '" + string(t) + "'", nil
}
