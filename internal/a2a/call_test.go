package a2a

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/agentd/agentd/internal/chat"
)

func TestApprovalsFromText(t *testing.T) {
	calls := &chat.PendingInput{Kind: chat.InputApproval, ToolCalls: []chat.ToolCall{{ID: "a"}, {ID: "b"}}}
	code := &chat.PendingInput{Kind: chat.InputApproval, CodeBlocks: []chat.PendingCode{{Language: "python", Code: "print(1)"}}}
	tests := []struct {
		name string
		p    *chat.PendingInput
		text string
		want []chat.Approval
	}{
		{"approve every call", calls, " Approve ", []chat.Approval{{ToolCallID: "a", Approve: true}, {ToolCallID: "b", Approve: true}}},
		{"reject with a reason", calls, "not the prod database",
			[]chat.Approval{{ToolCallID: "a", Reason: "not the prod database"}, {ToolCallID: "b", Reason: "not the prod database"}}},
		{"approve the code", code, "yes", []chat.Approval{{Approve: true}}},
		{"reject the code", code, "no", []chat.Approval{{Reason: "no"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := approvals(tt.p, tt.text); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("approvals(%q) = %+v, want %+v", tt.text, got, tt.want)
			}
		})
	}
}

func TestMessageContent(t *testing.T) {
	text := func(s string) Part { return Part{Text: &s} }
	url := "https://example.com/x.png"
	tests := []struct {
		name  string
		parts []Part
		text  string
		data  string
		code  int
	}{
		{"texts are joined", []Part{text("a"), text("b")}, "a\nb", "", 0},
		{"one data part", []Part{{Data: json.RawMessage(`{"speaker":"x"}`)}}, "", `{"speaker":"x"}`, 0},
		{"two data parts", []Part{{Data: json.RawMessage(`{}`)}, {Data: json.RawMessage(`{}`)}}, "", "", codeInvalidParams},
		{"a file", []Part{{URL: &url}}, "", "", codeContentTypeNotSupported},
		{"an empty part", []Part{{}}, "", "", codeInvalidParams},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, data, e := messageContent(tt.parts)
			code := 0
			if e != nil {
				code = e.Code
			}
			if got != tt.text || string(data) != tt.data || code != tt.code {
				t.Errorf("= %q, %s, %d; want %q, %s, %d", got, data, code, tt.text, tt.data, tt.code)
			}
		})
	}
}
