package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/llm/openaitest"
)

// patchContext sends PATCH /v1/chats/{id} with context_variables.
func (p *proc) patchContext(id, change string) (int, []byte) {
	p.t.Helper()
	code, _, b := p.do("PATCH", "/v1/chats/"+id, []byte(`{"context_variables": `+change+`}`))
	return code, b
}

// systemMessages are the system messages of the model requests so far.
func systemMessages(fake *openaitest.Server) []string {
	var out []string
	for _, r := range fake.Requests() {
		if r.Chat != nil && len(r.Chat.Messages) > 0 && r.Chat.Messages[0].Role == "system" {
			var text string
			_ = json.Unmarshal(r.Chat.Messages[0].Content, &text)
			out = append(out, text)
		}
	}
	return out
}

// waitRequests waits until the model has had n requests.
func waitRequests(t *testing.T, fake *openaitest.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for len(fake.Requests()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("the model had %d requests, want %d", len(fake.Requests()), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const contextChat = `{"task": "My lamp broke.", "max_round": 1,
	"context_variables": {"customer": "Ada", "tier": "gold", "severity": null},
	"agents": [{"name": "sales", "type": "assistant", "model": {"provider": "openai", "model": "gpt-test"},
	            "system_message_template": "Customer {customer} ({tier}), severity {severity}."}]}`

// TestContextVariablesSurviveKill9: the replica is killed (-9) while the
// turn after a context.updated waits on its model — the spec's variables
// at creation, then a PATCH's between runs. The replica started after it
// continues the chat from its log: the redone model call renders exactly
// the committed variables, and the chat object shows them. A PATCH during
// the run is a 409 that changes nothing; forks copy the variables as of
// their seq; streams carry every change.
func TestContextVariablesSurviveKill9(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, env []string) {
		fake := openaitest.New(openaitest.WithAPIKey("sk-test-key"))
		defer fake.Close()
		never := make(chan struct{})
		defer close(never)
		var hold atomic.Bool
		fake.Respond(func(openaitest.Request) openaitest.Reply {
			if hold.Load() {
				return openaitest.Reply{Content: "never sent", Hold: never}
			}
			return openaitest.Text("ok")
		})
		env = append(env, "OPENAI_API_KEY=sk-test-key", "OPENAI_BASE_URL="+fake.URL(), "AGENTD_LEASE_TTL=1s")

		// Killed during the first turn, after the spec's variables.
		hold.Store(true)
		p := startAgentd(t, env...)
		c := p.create([]byte(contextChat))
		waitRequests(t, fake, 1)
		p.kill9()
		hold.Store(false)
		p = startAgentd(t, env...)
		p.waitTerminal(c.ID, 60*time.Second)
		initial := `{"customer":"Ada","tier":"gold"}`
		if got := string(p.get(c.ID).ContextVariables); got != initial {
			t.Fatalf("after recovery: variables %s, want %s", got, initial)
		}
		if got := systemMessages(fake); !slices.Equal(got, []string{"Customer Ada (gold), severity .", "Customer Ada (gold), severity ."}) {
			t.Fatalf("system messages %q", got)
		}

		// Changed between runs, then killed during the next run's turn.
		code, b := p.patchContext(c.ID, `{"tier": null, "severity": 9}`)
		if code != http.StatusOK {
			t.Fatalf("patch: %d %s", code, b)
		}
		conforms(t, "Chat", b)
		var patched chatView
		mustUnmarshal(t, b, &patched)
		want := `{"customer":"Ada","severity":9}`
		if string(patched.ContextVariables) != want {
			t.Fatalf("patched: %s", patched.ContextVariables)
		}
		hold.Store(true)
		p.mustPostRun(c.ID, `{"task": "Still broken."}`, 2)
		waitRequests(t, fake, 3)
		if code, b := p.patchContext(c.ID, `{"severity": 1}`); code != http.StatusConflict {
			t.Fatalf("patch during a run: %d %s", code, b)
		}
		p.kill9()
		hold.Store(false)
		p = startAgentd(t, env...)
		p.waitRun(c.ID, 2, 60*time.Second)
		if got := string(p.get(c.ID).ContextVariables); got != want {
			t.Fatalf("after the second recovery: variables %s, want %s", got, want)
		}
		sys := systemMessages(fake)
		if len(sys) != 4 || sys[2] != "Customer Ada (), severity 9." || sys[3] != sys[2] {
			t.Fatalf("system messages %q", sys)
		}

		// Forks copy the variables as of their seq.
		for at, want := range map[int64]string{patched.LastSeq - 1: initial, patched.LastSeq: want} {
			code, _, b := p.do("POST", "/v1/chats/"+c.ID+"/fork", fmt.Appendf(nil, `{"at_seq": %d}`, at))
			if code != http.StatusCreated {
				t.Fatalf("fork at %d: %d %s", at, code, b)
			}
			conforms(t, "Chat", b)
			var f struct {
				ID               string          `json:"id"`
				ContextVariables json.RawMessage `json:"context_variables"`
			}
			mustUnmarshal(t, b, &f)
			if string(f.ContextVariables) != want || string(p.get(f.ID).ContextVariables) != want {
				t.Errorf("fork at %d: %s, want %s", at, f.ContextVariables, want)
			}
		}

		// The stream replays every change, as the log has them.
		evs, stop := p.stream(c.ID, 0)
		defer stop()
		var changes []string
		for _, e := range collect(t, evs, 30*time.Second) {
			if e.Type == "context.updated" {
				// As the store gives it back (jsonb orders keys its own way).
				var v any
				mustUnmarshal(t, e.Data, &v)
				b, _ := json.Marshal(v)
				changes = append(changes, string(b))
			}
		}
		if !slices.Equal(changes, []string{`{"by":{"client":"create"},"set":{"customer":"Ada","tier":"gold"}}`,
			`{"by":{"client":"patch"},"removed":["tier"],"set":{"severity":9}}`}) {
			t.Fatalf("context.updated events %q", changes)
		}
	})
}

// conditionChat is a swarm whose triage hands off to escalation, without
// a tool, when the severity it starts with is 8 or more.
func conditionChat(severity int) []byte {
	return fmt.Appendf(nil, `{"task": "My lamp broke.", "max_round": 2,
		"context_variables": {"severity": %d, "tier": "gold"},
		"speaker_selection": {"method": "swarm"},
		"agents": [
			{"name": "triage", "type": "assistant", "model": {"provider": "replay", "responses": ["What happened?", "Tell me more."]},
			 "handoffs": [{"target": "escalation", "condition": "severity >= 8 && tier == \"gold\""}, "sales"]},
			{"name": "sales", "type": "assistant", "model": {"provider": "replay", "responses": ["Buy a lamp."]}},
			{"name": "escalation", "type": "assistant", "model": {"provider": "replay", "responses": ["Escalated."]},
			 "system_message_template": "Severity {severity} case."}]}`, severity)
}

// TestConditionalHandoffOverHTTP: a hand-off with a CEL condition routes
// as AG2's OnContextCondition does — when the agent is about to reply and
// the expression holds, its turn is the hand-off, with no model call, and
// the swarm goes on with the target; when it does not hold the agent
// replies. Invalid, non-boolean and unknown-variable expressions are
// refused at create, each at its path.
func TestConditionalHandoffOverHTTP(t *testing.T) {
	t.Parallel()
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir())
	type msg struct {
		Type    string `json:"type"`
		Name    string `json:"name"`
		Content string `json:"content"`
		Handoff string `json:"handoff"`
	}
	run := func(severity int) []string {
		c := p.create(conditionChat(severity))
		p.waitTerminal(c.ID, 30*time.Second)
		_, _, b := p.do("GET", "/v1/chats/"+c.ID+"/messages", nil)
		var page struct{ Messages []msg }
		mustUnmarshal(t, b, &page)
		var got []string
		for _, m := range page.Messages {
			got = append(got, fmt.Sprintf("%s %s: %s %s", m.Type, m.Name, m.Content, m.Handoff))
		}
		return got
	}
	if got, want := run(9), []string{"TextMessage user: My lamp broke. ", "HandoffMessage triage: [Handing off to escalation] escalation",
		"TextMessage escalation: Escalated. "}; !slices.Equal(got, want) {
		t.Errorf("severity 9:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got, want := run(3), []string{"TextMessage user: My lamp broke. ", "TextMessage triage: What happened? ",
		"TextMessage triage: Tell me more. "}; !slices.Equal(got, want) {
		t.Errorf("severity 3:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	bad := `{"task": "t", "context_variables": {"severity": null},
		"speaker_selection": {"method": "swarm"},
		"agents": [
			{"name": "triage", "type": "assistant", "model": {"provider": "replay", "responses": ["x"]},
			 "handoffs": [{"target": "escalation", "condition": "severity >="},
			              {"target": "escalation", "condition": "severity + 1"},
			              {"target": "escalation", "condition": "priority > 3"}]},
			{"name": "escalation", "type": "assistant", "model": {"provider": "replay", "responses": ["x"]}}]}`
	code, _, b := p.do("POST", "/v1/chats", []byte(bad))
	if code != http.StatusUnprocessableEntity {
		t.Fatalf("bad conditions: %d %s", code, b)
	}
	conforms(t, "Problem", b)
	var prob struct {
		Errors []struct{ Path, Message string }
	}
	mustUnmarshal(t, b, &prob)
	want := map[string]string{
		"/agents/0/handoffs/0/condition": "Syntax error",
		"/agents/0/handoffs/1/condition": "must be a boolean expression",
		"/agents/0/handoffs/2/condition": "undeclared reference to 'priority'",
	}
	if len(prob.Errors) != len(want) {
		t.Fatalf("problems %+v, want %v", prob.Errors, want)
	}
	for _, e := range prob.Errors {
		if !strings.Contains(e.Message, want[e.Path]) || want[e.Path] == "" {
			t.Errorf("problem %s: %s", e.Path, e.Message)
		}
	}
}

// TestChatCommandPrintsVariables: agentd chat prints a chat's variables
// and each change of them.
func TestChatCommandPrintsVariables(t *testing.T) {
	t.Parallel()
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir())
	spec := writeSpec(t, `{"task": "t", "max_round": 1, "context_variables": {"tier": "gold"},
		"agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": ["ok"]}}]}`)
	out, errOut, code := p.cli(nil, "run", spec)
	if want := `── variables set {"tier":"gold"} (by create)`; code != 0 || !strings.Contains(out, want) {
		t.Fatalf("run: exit %d, want %q in\n%s%s", code, want, out, errOut)
	}
	id := regexp.MustCompile(`chat ([0-9a-f-]{36})`).FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("no chat id in\n%s", out)
	}
	if code, b := p.patchContext(id[1], `{"tier": null, "severity": 9}`); code != http.StatusOK {
		t.Fatalf("patch: %d %s", code, b)
	}
	out, errOut, code = p.cli(nil, "show", id[1])
	if want := `  variables  {"severity":9}`; code != 0 || !strings.Contains(out, want+"\n") {
		t.Fatalf("show: exit %d, want %q in\n%s%s", code, want, out, errOut)
	}
}

// TestConsoleShowsVariables: the web console shows a chat's variables
// among its facts and each change in its transcript, in Chromium.
func TestConsoleShowsVariables(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none")
	c := p.create(conditionChat(9))
	p.waitTerminal(c.ID, 30*time.Second)
	if code, body := p.patchContext(c.ID, `{"tier": null, "case": "C-7"}`); code != http.StatusOK {
		t.Fatalf("patch: %d %s", code, body)
	}
	b.openChat(p.base, c.ID)
	b.checkTranscript(p, c.ID)
	b.waitJS("the variables among the facts", `document.querySelector('[data-fact="context_variables"]')?.textContent === 'variables case=C-7 · severity=9'`)
	notes := eval[[]string](b, `[...document.querySelectorAll('#transcript li.context-change')].map(li => li.textContent)`)
	want := []string{"Variables set severity=9 · tier=gold (by create).", "Variables set case=C-7; removed tier (by patch)."}
	if !slices.Equal(notes, want) {
		t.Errorf("the transcript's changes %q, want %q", notes, want)
	}
}
