package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"
)

type pendingView struct {
	RequestID  string   `json:"request_id"`
	Kind       string   `json:"kind"`
	Agent      string   `json:"agent"`
	Candidates []string `json:"candidates"`
}

// waitPause long-polls a chat until it waits for input with a request other
// than prev, and returns that request.
func (p *proc) waitPause(id, prev string) (chatView, pendingView) {
	p.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, _, b := p.do("GET", "/v1/chats/"+id, nil)
		var c struct {
			chatView
			Pending *pendingView `json:"pending_input"`
		}
		mustUnmarshal(p.t, b, &c)
		if code == 200 && c.Status == "awaiting_input" && c.Pending != nil && c.Pending.RequestID != prev {
			return c.chatView, *c.Pending
		}
		if c.Status == "completed" || c.Status == "failed" || c.Status == "cancelled" || time.Now().After(deadline) {
			p.t.Fatalf("chat %s did not pause: %s", id, b)
		}
		p.do("GET", fmt.Sprintf("/v1/chats/%s/messages?after=%d&wait_s=2", id, c.LastSeq), nil)
	}
}

func (p *proc) input(id string, body any) (int, []byte) {
	p.t.Helper()
	b, _ := json.Marshal(body)
	code, _, resp := p.do("POST", "/v1/chats/"+id+"/input", b)
	if code == http.StatusAccepted {
		conforms(p.t, "Chat", resp)
	} else {
		conforms(p.t, "Problem", resp)
	}
	return code, resp
}

// TestPausedChatSurvivesKillAndRestart: a chat waiting for a human holds no
// worker, so killing agentd loses nothing; the restarted server takes the
// answer and the chat completes. A repeated request_id is refused with 409
// and appends nothing.
func TestPausedChatSurvivesKillAndRestart(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, env []string) {
		env = append(env, "AGENTD_LEASE_TTL=1s")
		p := startAgentd(t, env...)
		c := p.create(readExample(t, "human-review.json"))
		_, req := p.waitPause(c.ID, "")
		if req.Kind != "message" || req.Agent != "editor" {
			t.Fatalf("pending = %+v", req)
		}
		p.kill9()

		p2 := startAgentd(t, env...)
		if code, b := p2.input(c.ID, map[string]any{"request_id": req.RequestID, "content": "Mention Last-Event-ID."}); code != http.StatusAccepted {
			t.Fatalf("input after restart: %d %s", code, b)
		}
		view, req2 := p2.waitPause(c.ID, req.RequestID)
		if code, b := p2.input(c.ID, map[string]any{"request_id": req.RequestID, "content": "again"}); code != http.StatusConflict {
			t.Fatalf("same request_id twice: %d %s", code, b)
		}
		if again := p2.get(c.ID); again.LastSeq != view.LastSeq {
			t.Fatalf("a refused input appended events: last_seq %d → %d", view.LastSeq, again.LastSeq)
		}
		if code, b := p2.input(c.ID, map[string]any{"request_id": req2.RequestID, "content": "exit"}); code != http.StatusAccepted {
			t.Fatalf("exit: %d %s", code, b)
		}
		final := p2.waitTerminal(c.ID, 30*time.Second)
		if final.Status != "completed" || *final.StopReason != "human_exit" {
			t.Fatalf("chat = %+v", final)
		}
		var got []string
		for _, m := range p2.messages(c.ID) {
			got = append(got, m.Name)
		}
		if want := []string{"user", "writer", "editor", "writer"}; !slices.Equal(got, want) {
			t.Fatalf("speakers = %v, want %v", got, want)
		}
	})
}

func TestManualSelectionDrivenOverHTTP(t *testing.T) {
	t.Parallel()
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir())
	c := p.create(readExample(t, "manual-selection.json"))
	prev := ""
	for _, who := range []string{"colours", "fruits", "colours", "fruits"} {
		_, req := p.waitPause(c.ID, prev)
		if req.Kind != "speaker" || !slices.Equal(req.Candidates, []string{"colours", "fruits"}) {
			t.Fatalf("pending = %+v", req)
		}
		// A long poll on a chat that waits for a person answers at once.
		start := time.Now()
		if code, _, b := p.do("GET", "/v1/chats/"+c.ID+"/messages?after=1000&wait_s=20", nil); code != 200 || time.Since(start) > 5*time.Second {
			t.Fatalf("long poll of a paused chat: %d after %v: %s", code, time.Since(start), b)
		}
		if code, b := p.input(c.ID, map[string]any{"request_id": req.RequestID, "speaker": who}); code != http.StatusAccepted {
			t.Fatalf("select %s: %d %s", who, code, b)
		}
		prev = req.RequestID
	}
	final := p.waitTerminal(c.ID, 30*time.Second)
	var got []string
	for _, m := range p.messages(c.ID) {
		got = append(got, m.Content)
	}
	if want := []string{"Name a colour, then a fruit of that colour.", "Yellow.", "A banana.", "Purple.", "A plum."}; !slices.Equal(got, want) || *final.StopReason != "max_round" {
		t.Fatalf("messages = %v, chat %+v", got, final)
	}
}

func TestAutoTeamExampleEndsOnApproval(t *testing.T) {
	t.Parallel()
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir())
	c := p.create(readExample(t, "auto-team.json"))
	final := p.waitTerminal(c.ID, 30*time.Second)
	var got []string
	for _, m := range p.messages(c.ID) {
		got = append(got, m.Name)
	}
	if want := []string{"user", "planner", "coder", "reviewer", "coder", "reviewer"}; !slices.Equal(got, want) ||
		*final.StopReason != "text_mention" || *final.StopDetail != "Text 'APPROVED' mentioned" {
		t.Fatalf("speakers = %v, chat %+v", got, final)
	}
}

func TestSwarmTriageExampleHandsOffToBilling(t *testing.T) {
	t.Parallel()
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir())
	c := p.create(readExample(t, "swarm-triage.json"))
	final := p.waitTerminal(c.ID, 30*time.Second)
	code, _, b := p.do("GET", "/v1/chats/"+c.ID+"/messages", nil)
	var page struct {
		Messages []struct {
			Name      string `json:"name"`
			Role      string `json:"role"`
			Handoff   string `json:"handoff"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
			ToolResponses []struct {
				ToolCallID string `json:"tool_call_id"`
				Role       string `json:"role"`
				Content    string `json:"content"`
			} `json:"tool_responses"`
		} `json:"messages"`
	}
	mustUnmarshal(t, b, &page)
	m := page.Messages
	if code != 200 || len(m) != 5 || *final.StopReason != "text_mention" {
		t.Fatalf("messages %s, chat %+v", b, final)
	}
	call := m[1].ToolCalls[0]
	if m[1].Role != "assistant" || call.Type != "function" || call.Function.Name != "transfer_to_billing" || call.Function.Arguments != "{}" {
		t.Fatalf("tool_calls message = %+v", m[1])
	}
	if m[2].Role != "tool" || m[2].ToolResponses[0].ToolCallID != call.ID || m[2].ToolResponses[0].Role != "tool" {
		t.Fatalf("tool_responses message = %+v", m[2])
	}
	if m[3].Handoff != "billing" || m[4].Name != "billing" {
		t.Fatalf("handoff = %+v, next speaker %s", m[3], m[4].Name)
	}
	// The SSE stream carries the same shapes.
	events, stop := p.stream(c.ID, 0)
	defer stop()
	var sawCalls, sawResponses bool
	for _, e := range collect(t, events, 10*time.Second) {
		if e.Type != "message" {
			continue
		}
		var msg struct {
			ToolCalls []struct {
				ID       string          `json:"id"`
				Type     string          `json:"type"`
				Function json.RawMessage `json:"function"`
			} `json:"tool_calls"`
			ToolResponses []struct {
				ToolCallID string `json:"tool_call_id"`
				Role       string `json:"role"`
			} `json:"tool_responses"`
		}
		mustUnmarshal(t, e.Data, &msg)
		if len(msg.ToolCalls) > 0 {
			sawCalls = msg.ToolCalls[0].ID == call.ID && msg.ToolCalls[0].Type == "function" &&
				string(msg.ToolCalls[0].Function) == `{"name":"transfer_to_billing","arguments":"{}"}`
		}
		if len(msg.ToolResponses) > 0 {
			sawResponses = msg.ToolResponses[0].ToolCallID == call.ID && msg.ToolResponses[0].Role == "tool"
		}
	}
	if !sawCalls || !sawResponses {
		t.Fatalf("SSE message events lack the seed shapes (calls %v, responses %v)", sawCalls, sawResponses)
	}
}

func TestTerminationAlgebraExample(t *testing.T) {
	t.Parallel()
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir())
	c := p.create(readExample(t, "termination-algebra.json"))
	final := p.waitTerminal(c.ID, 30*time.Second)
	// all(text_match, source_match): the reviewer spoke first (turn 2), the
	// final answer came in turn 3; the chat stops there, on the reason that
	// fired first.
	if *final.StopReason != "source_match" || *final.StopDetail != "'reviewer' answered, Text matched pattern 'FINAL ANSWER: \\d+'" || final.Turns != 3 {
		t.Fatalf("chat = %+v (detail %q)", final, *final.StopDetail)
	}
}
