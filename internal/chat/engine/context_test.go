package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/chat"

	"github.com/agentd/agentd/internal/spec"
)

// TestAgentContext checks what an assistant sees of a log, message by
// message; the golden runs in e2e/autogen check the same against AutoGen.
func TestAgentContext(t *testing.T) {
	sp := &spec.Spec{Agents: []spec.Agent{
		{Name: "a", Type: spec.AgentAssistant, Tools: []string{"f"}, Handoffs: []spec.Handoff{spec.HandoffTo("B")}},
		{Name: "B", Type: spec.AgentAssistant},
		{Name: "px", Type: spec.AgentUserProxy, Functions: []string{"g"}},
	}}
	call := func(id, name string) chat.ToolCall {
		return chat.ToolCall{ID: id, Type: "function", Function: chat.FunctionCall{Name: name, Arguments: "{}"}}
	}
	var msgs []chat.Message
	var meta []chat.MessageData
	add := func(m chat.Message, d chat.MessageData) {
		m.Type = chat.MessageType(chat.Event{Role: m.Role, ToolCalls: m.ToolCalls, ToolResponses: m.ToolResponses}, d)
		msgs, meta = append(msgs, m), append(meta, d)
	}
	add(chat.Message{Role: chat.RoleUser, Name: "user", Content: "task"}, chat.MessageData{Kind: chat.KindTask})
	// a: a tool turn ending in a summary.
	add(chat.Message{Role: chat.RoleAssistant, Name: "a", ToolCalls: []chat.ToolCall{call("c1", "f"), call("c2", "f")}}, chat.MessageData{Kind: chat.KindModel, Turn: 1})
	add(chat.Message{Role: chat.RoleTool, Name: "a", ToolResponses: []chat.ToolResponse{{ToolCallID: "c1", Content: "r1"}, {ToolCallID: "c2", Content: "r2"}}}, chat.MessageData{Kind: chat.KindTool, Turn: 1})
	add(chat.Message{Role: chat.RoleAssistant, Name: "a", Content: "r1\nr2"}, chat.MessageData{Kind: chat.KindSummary, Turn: 1, End: true})
	// B: calls a function the proxy runs; the proxy answers.
	add(chat.Message{Role: chat.RoleAssistant, Name: "B", Content: "moving", ToolCalls: []chat.ToolCall{call("c3", "g")}}, chat.MessageData{Kind: chat.KindModel, Turn: 2, End: true})
	add(chat.Message{Role: chat.RoleTool, Name: "px", ToolResponses: []chat.ToolResponse{{ToolCallID: "c3", Content: "moved"}}}, chat.MessageData{Kind: chat.KindTool, Turn: 3, End: true})
	// a: a tool call and a handoff in one reply.
	add(chat.Message{Role: chat.RoleAssistant, Name: "a", Content: "passing", ToolCalls: []chat.ToolCall{call("c4", "f"), call("c5", "transfer_to_b")}}, chat.MessageData{Kind: chat.KindModel, Turn: 4})
	add(chat.Message{Role: chat.RoleTool, Name: "a", ToolResponses: []chat.ToolResponse{{ToolCallID: "c4", Content: "r4"}, {ToolCallID: "c5", Content: handoffContent("B")}}}, chat.MessageData{Kind: chat.KindTool, Turn: 4})
	add(chat.Message{Role: chat.RoleAssistant, Name: "a", Content: handoffContent("B"), Handoff: "B"}, chat.MessageData{Kind: chat.KindHandoff, Turn: 4, End: true})

	show := func(ms []chat.ModelMessage, err error) string {
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, m := range ms {
			fmt.Fprintf(&b, "%s/%s:%q", m.Role, m.Name, m.Content)
			for _, c := range m.ToolCalls {
				fmt.Fprintf(&b, " call %s", c.ID)
			}
			if m.ToolCallID != "" {
				fmt.Fprintf(&b, " for %s", m.ToolCallID)
			}
			b.WriteString("\n")
		}
		return b.String()
	}
	wantA := `user/user:"task"
assistant/:"" call c1 call c2
tool/:"r1" for c1
tool/:"r2" for c2
user/B:"moving\n[B calls g({})]"
user/px:"moved"
assistant/:"passing" call c4 call c5
tool/:"r4" for c4
tool/:"Transferred to B, adopting the role of B immediately." for c5
`
	if got := show(agentContext(sp, &sp.Agents[0], msgs, meta, nil)); got != wantA {
		t.Errorf("a sees:\n%s\nwant:\n%s", got, wantA)
	}
	wantB := `user/user:"task"
user/a:"r1\nr2"
assistant/:"moving" call c3
tool/:"moved" for c3
assistant/:"passing" call c4
tool/:"r4" for c4
user/a:"Transferred to B, adopting the role of B immediately."
`
	if got := show(agentContext(sp, &sp.Agents[1], msgs, meta, nil)); got != wantB {
		t.Errorf("B sees:\n%s\nwant:\n%s", got, wantB)
	}
	// buffer_size counts AgentChat's messages: the two results of c1 and c2
	// are one; a window never starts with results.
	three := 3
	sp.Agents[1].Context = &spec.ModelContext{BufferSize: &three}
	wantB3 := `assistant/:"passing" call c4
tool/:"r4" for c4
user/a:"Transferred to B, adopting the role of B immediately."
`
	if got := show(agentContext(sp, &sp.Agents[1], msgs, meta, nil)); got != wantB3 {
		t.Errorf("B with buffer_size 3 sees:\n%s\nwant:\n%s", got, wantB3)
	}
	two := 2
	sp.Agents[1].Context = &spec.ModelContext{BufferSize: &two}
	wantB2 := `user/a:"Transferred to B, adopting the role of B immediately."
`
	if got := show(agentContext(sp, &sp.Agents[1], msgs, meta, nil)); got != wantB2 {
		t.Errorf("B with buffer_size 2 sees:\n%s\nwant:\n%s", got, wantB2)
	}
	// head_and_tail: B's 7 messages, head 2 and tail 2: a note of the 3
	// skipped; the tail's first message is results, which go.
	sp.Agents[1].Context = &spec.ModelContext{Type: spec.ContextHeadAndTail, HeadSize: &two, TailSize: &two}
	wantHT := `user/user:"task"
user/a:"r1\nr2"
user/System:"Skipped 3 messages."
user/a:"Transferred to B, adopting the role of B immediately."
`
	if got := show(agentContext(sp, &sp.Agents[1], msgs, meta, nil)); got != wantHT {
		t.Errorf("B with head and tail 2 sees:\n%s\nwant:\n%s", got, wantHT)
	}
	// A head that would end with a tool call leaves it out.
	sp.Agents[1].Context = &spec.ModelContext{Type: spec.ContextHeadAndTail, HeadSize: &three, TailSize: &three}
	wantHT3 := `user/user:"task"
user/a:"r1\nr2"
user/System:"Skipped 1 messages."
assistant/:"passing" call c4
tool/:"r4" for c4
user/a:"Transferred to B, adopting the role of B immediately."
`
	if got := show(agentContext(sp, &sp.Agents[1], msgs, meta, nil)); got != wantHT3 {
		t.Errorf("B with head and tail 3 sees:\n%s\nwant:\n%s", got, wantHT3)
	}
	// token_limited: middle messages go until the rest fits; a window never
	// starts with results. Here a message counts its content's bytes.
	limit := 70
	sp.Agents[1].Context = &spec.ModelContext{Type: spec.ContextTokenLimited, TokenLimit: &limit}
	if _, err := agentContext(sp, &sp.Agents[1], msgs, meta, nil); err == nil {
		t.Error("a token-limited context without a token counter: no error")
	}
	wantTL := `user/user:"task"
user/a:"r1\nr2"
tool/:"r4" for c4
user/a:"Transferred to B, adopting the role of B immediately."
`
	if got := show(agentContext(sp, &sp.Agents[1], msgs, meta, byteCounter{})); got != wantTL {
		t.Errorf("B with token_limit 70 sees:\n%s\nwant:\n%s", got, wantTL)
	}
}

// byteCounter counts a message's content bytes, and 1 for the reply.
type byteCounter struct{}

func (byteCounter) CountTokens(_ spec.Model, msgs []chat.ModelMessage) (int, error) {
	n := 1
	for _, m := range msgs {
		n += len(m.Content)
	}
	return n, nil
}

// TestContextThinkingBlocksStayWithTheirAgent: the signed thinking blocks of
// a reply that asks for tools are kept in its event's data, come back on
// that assistant message in the agent's own context, and nowhere else: not
// in another agent's view of the turn (a handoff's context), not in the
// message clients see, not on a text reply.
func TestContextThinkingBlocksStayWithTheirAgent(t *testing.T) {
	sp := &spec.Spec{Agents: []spec.Agent{
		{Name: "a", Type: spec.AgentAssistant, Tools: []string{"f"}, Handoffs: []spec.Handoff{spec.HandoffTo("B")}},
		{Name: "B", Type: spec.AgentAssistant},
	}}
	blocks := []chat.ThinkingBlock{{Type: "thinking", Thinking: "Use f, then hand off.", Signature: "sig-secret"}, {Type: "redacted_thinking", Data: "data-secret"}}
	var (
		msgs []chat.Message
		meta []chat.MessageData
	)
	add := func(e chat.Event) {
		t.Helper()
		e = chat.Untyped([]chat.Event{e})[0] // as read back from a store
		var d chat.MessageData
		if err := chat.DecodeData(e, &d); err != nil {
			t.Fatal(err)
		}
		m, _ := chat.MessageFromEvent(e)
		if b, _ := json.Marshal(m); strings.Contains(string(b), "secret") {
			t.Errorf("a client sees the blocks: %s", b)
		}
		msgs, meta = append(msgs, m), append(meta, d)
	}
	add(chat.WithData(chat.Event{Type: chat.EventMessage, Role: chat.RoleUser, Name: "user", Content: "task"}, chat.MessageData{Kind: chat.KindTask}))
	calls := []chat.ToolCall{{ID: "c1", Type: "function", Function: chat.FunctionCall{Name: "f", Arguments: "{}"}},
		{ID: "c2", Type: "function", Function: chat.FunctionCall{Name: "transfer_to_b", Arguments: "{}"}}}
	ev, err := ModelReply(&sp.Agents[0], 1, &chat.ModelResponse{Content: "passing", ToolCalls: calls, Thought: "Use f, then hand off.", Thinking: blocks}, &Toolbox{}, false)
	if err != nil {
		t.Fatal(err)
	}
	ev.Seq = 2
	add(ev)
	if got := msgs[1].Thought; got != "Use f, then hand off." {
		t.Errorf("thought = %q", got)
	}
	add(chat.WithData(chat.Event{Type: chat.EventMessage, Role: chat.RoleTool, Name: "a", ToolResponses: []chat.ToolResponse{{ToolCallID: "c1", Content: "r1"}, {ToolCallID: "c2", Content: handoffContent("B")}}}, chat.MessageData{Kind: chat.KindTool, Turn: 1}))
	add(chat.WithData(chat.Event{Type: chat.EventMessage, Role: chat.RoleAssistant, Name: "a", Content: handoffContent("B")}, chat.MessageData{Kind: chat.KindHandoff, Handoff: "B", Turn: 1, End: true}))
	text, err := ModelReply(&sp.Agents[1], 2, &chat.ModelResponse{Content: "done", Thought: "x", Thinking: blocks}, &Toolbox{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(text.Data), "secret") {
		t.Errorf("a text reply keeps its blocks: %s", text.Data)
	}
	for i := range msgs {
		msgs[i].Type = chat.MessageType(chat.Event{Role: msgs[i].Role, ToolCalls: msgs[i].ToolCalls, ToolResponses: msgs[i].ToolResponses}, meta[i])
	}

	own, err := agentContext(sp, &sp.Agents[0], msgs, meta, nil)
	if err != nil {
		t.Fatal(err)
	}
	var carried int
	for _, m := range own {
		if len(m.Thinking()) > 0 {
			carried++
			if m.Role != chat.RoleAssistant || len(m.ToolCalls) != 2 || !slices.Equal(m.Thinking(), blocks) {
				t.Errorf("blocks on %+v", m)
			}
		}
	}
	if carried != 1 {
		t.Errorf("the agent's own context carries the blocks on %d messages, want 1: %+v", carried, own)
	}
	other, err := agentContext(sp, &sp.Agents[1], msgs, meta, nil)
	if err != nil {
		t.Fatal(err)
	}
	sawCalls := false
	for _, m := range other {
		sawCalls = sawCalls || len(m.ToolCalls) > 0
		if len(m.Thinking()) > 0 {
			t.Errorf("another agent is sent the blocks: %+v", m)
		}
	}
	if !sawCalls {
		t.Errorf("the handoff context shows no calls, so the test shows nothing: %+v", other)
	}
}
