package chat

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// Storable returns e with every text made storable by both stores: valid
// UTF-8 without NUL, each invalid byte sequence and each NUL replaced by
// U+FFFD. Model replies, tool results and code output may hold either, and
// Postgres can hold neither (text and jsonb); the worker repairs them before
// the append, so both stores, and the worker's own state, keep the same
// text. Clients lose nothing they could see: a JSON encoder turns invalid
// UTF-8 into U+FFFD anyway.
func Storable(e Event) Event {
	e.Role, e.Name, e.Content = storableText(e.Role), storableText(e.Name), storableText(e.Content)
	if len(e.ToolCalls) > 0 {
		calls := make([]ToolCall, len(e.ToolCalls))
		for i, c := range e.ToolCalls {
			calls[i] = ToolCall{ID: storableText(c.ID), Type: storableText(c.Type),
				Function: FunctionCall{Name: storableText(c.Function.Name), Arguments: storableText(c.Function.Arguments)}}
		}
		e.ToolCalls = calls
	}
	if len(e.ToolResponses) > 0 {
		rs := make([]ToolResponse, len(e.ToolResponses))
		for i, r := range e.ToolResponses {
			rs[i] = ToolResponse{ToolCallID: storableText(r.ToolCallID), Role: storableText(r.Role), Content: storableText(r.Content), IsError: r.IsError}
		}
		e.ToolResponses = rs
	}
	e.Data = storableJSON(e.Data)
	return e
}

// storableText is s as the stores keep text (see storable).
func storableText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// storableJSON replaces the escape \u0000 in the strings of encoded JSON by
// \ufffd (Postgres jsonb refuses it) and repairs invalid UTF-8.
func storableJSON(b []byte) []byte {
	if !utf8.Valid(b) {
		b = bytes.ToValidUTF8(b, []byte("\uFFFD"))
	}
	if !bytes.Contains(b, []byte(`\u0000`)) {
		return b
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		// An escape: \uXXXX or a two-byte one; outside strings JSON has no
		// backslash.
		if b[i+1] == 'u' && i+6 <= len(b) && string(b[i+2:i+6]) == "0000" {
			out = append(out, `\ufffd`...)
			i += 5
			continue
		}
		out = append(out, b[i], b[i+1])
		i++
	}
	return out
}
