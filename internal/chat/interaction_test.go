package chat

import (
	"reflect"
	"testing"
)

func TestApprovalsFromText(t *testing.T) {
	calls := &PendingInput{Kind: InputApproval, ToolCalls: []ToolCall{{ID: "a"}, {ID: "b"}}}
	code := &PendingInput{Kind: InputApproval, CodeBlocks: []PendingCode{{Language: "python", Code: "print(1)"}}}
	tests := []struct {
		name string
		p    *PendingInput
		text string
		want []Approval
	}{
		{"approve every call", calls, " Approve ", []Approval{{ToolCallID: "a", Approve: true}, {ToolCallID: "b", Approve: true}}},
		{"reject with a reason", calls, "not the prod database",
			[]Approval{{ToolCallID: "a", Reason: "not the prod database"}, {ToolCallID: "b", Reason: "not the prod database"}}},
		{"approve the code", code, "yes", []Approval{{Approve: true}}},
		{"reject the code", code, "no", []Approval{{Reason: "no"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.ApprovalsFromText(tt.text); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ApprovalsFromText(%q) = %+v, want %+v", tt.text, got, tt.want)
			}
		})
	}
}
