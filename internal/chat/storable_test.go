package chat

import (
	"strings"
	"testing"
)

// TestStorableRepairsText: model and tool output is made storable — NUL and
// invalid UTF-8 become U+FFFD, in columns and in JSON data alike — and
// anything already storable is left as it is.
func TestStorableRepairsText(t *testing.T) {
	e := Storable(Event{Type: EventMessage, Content: "a\x00b\xffc",
		ToolCalls:     []ToolCall{{ID: "c1", Function: FunctionCall{Name: "f", Arguments: "{\"x\":\"\x00\"}"}}},
		ToolResponses: []ToolResponse{{ToolCallID: "c1", Content: "\x00"}},
		Data:          MustJSON(MessageData{CodeResult: &CodeResult{Output: "out\x00put"}})})
	if e.Content != "a\uFFFDb\uFFFDc" || e.ToolCalls[0].Function.Arguments != "{\"x\":\"\uFFFD\"}" || e.ToolResponses[0].Content != "\uFFFD" {
		t.Fatalf("repaired event %+v", e)
	}
	if strings.Contains(string(e.Data), `\u0000`) || !strings.Contains(string(e.Data), `out\ufffdput`) {
		t.Fatalf("data %s", e.Data)
	}
	if got := storableJSON([]byte(`{"a":"\\u0000"}`)); string(got) != `{"a":"\\u0000"}` {
		t.Fatalf("an escaped backslash before u0000 is text, not a NUL: %s", got)
	}
}
