package agui

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
)

func TestReadInputListsEveryProblem(t *testing.T) {
	h := &Handler{cfg: Config{MaxBodyBytes: 1 << 20}}
	body := `{"threadId": "", "runId": "` + strings.Repeat("r", 201) + `", "messages": [], "resume": [{"status": "maybe"}], "tools": [], "state": {"x": 1}}`
	_, err := h.readInput(httptest.NewRecorder(), httptest.NewRequest("POST", "/ag-ui/t", strings.NewReader(body)))
	var v *spec.ValidationError
	if !errors.As(err, &v) {
		t.Fatalf("err = %v, want a validation error", err)
	}
	var paths []string
	for _, p := range v.Problems {
		paths = append(paths, p.Path)
	}
	if want := "/threadId /runId /resume/0/interruptId /resume/0/status"; strings.Join(paths, " ") != want {
		t.Errorf("problems at %v, want %s", paths, want)
	}
	in, err := h.readInput(httptest.NewRecorder(), httptest.NewRequest("POST", "/ag-ui/t", strings.NewReader(
		`{"threadId": "t", "runId": "r", "messages": [{"id": "1", "role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}], "forwardedProps": {}}`)))
	if err != nil || in.lastUserText() != "a\nb" {
		t.Errorf("a valid input: %v, task %q", err, in.lastUserText())
	}
}

func TestAnswer(t *testing.T) {
	message := &chat.PendingInput{RequestID: "q", Kind: chat.InputMessage}
	speaker := &chat.PendingInput{RequestID: "q", Kind: chat.InputSpeaker, Candidates: []string{"a", "b"}}
	approval := &chat.PendingInput{RequestID: "q", Kind: chat.InputApproval, ToolCalls: []chat.ToolCall{{ID: "c1"}}}
	str := func(s string) *string { return &s }
	user := func(text string) []inputMessage {
		c, _ := json.Marshal(text)
		return []inputMessage{{Role: "user", Content: c}}
	}
	resume := func(status, payload string) []resumeEntry {
		return []resumeEntry{{InterruptID: "other"}, {InterruptID: "q", Status: status, Payload: json.RawMessage(payload)}}
	}
	tests := []struct {
		name string
		p    *chat.PendingInput
		in   runAgentInput
		want *chat.Input
		bad  bool
	}{
		{"the last user message answers a human", message, runAgentInput{Messages: user("yes, go on")}, &chat.Input{RequestID: "q", Content: str("yes, go on")}, false},
		{"a resume text answers a human", message, runAgentInput{Messages: user("old task"), Resume: resume(resumeResolve, `"shorter"`)}, &chat.Input{RequestID: "q", Content: str("shorter")}, false},
		{"a resume text names the speaker", speaker, runAgentInput{Resume: resume(resumeResolve, `" b "`)}, &chat.Input{RequestID: "q", Speaker: str("b")}, false},
		{"approve", approval, runAgentInput{Resume: resume(resumeResolve, `"approve"`)}, &chat.Input{RequestID: "q", Approvals: []chat.Approval{{ToolCallID: "c1", Approve: true}}}, false},
		{"a cancelled approval rejects", approval, runAgentInput{Resume: resume(resumeCancel, ``)}, &chat.Input{RequestID: "q", Approvals: []chat.Approval{{ToolCallID: "c1", Reason: "cancelled"}}}, false},
		{"approvals with edited arguments", approval, runAgentInput{Resume: resume(resumeResolve, `{"approvals": [{"tool_call_id": "c1", "approve": true, "arguments": {"n": 2}}]}`)},
			&chat.Input{RequestID: "q", Approvals: []chat.Approval{{ToolCallID: "c1", Approve: true, Arguments: json.RawMessage(`{"n": 2}`)}}}, false},
		{"an unknown field of the payload", approval, runAgentInput{Resume: resume(resumeResolve, `{"approve": true}`)}, nil, true},
		{"no answer", message, runAgentInput{}, nil, true},
		{"a human's turn is not cancelled", message, runAgentInput{Resume: resume(resumeCancel, ``)}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.in.answer(tt.p)
			var v *spec.ValidationError
			if tt.bad {
				if !errors.As(err, &v) {
					t.Fatalf("answer = %+v, %v; want a validation error", got, err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("answer = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}
