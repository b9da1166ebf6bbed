// Package autogen_test compares agentd with recorded runs of AutoGen AgentChat
// 0.7.5 (testdata, made by record.py from scenarios; see README.md): the same
// spec and model script must give the same model requests, the same
// transcript and the same stop text.
package autogen_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	_ "image/png" // images of model requests
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/runtime"

	"github.com/agentd/agentd/e2e/golden"
	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/component"
	"github.com/agentd/agentd/internal/llm/openaitest"
	"github.com/agentd/agentd/internal/sandbox"
	agentdspec "github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/store"
)

// scenario is a file of scenarios/.
type scenario struct {
	// Spec is kept as written: the order of an output_schema's properties
	// is the order of a structured reply's fields.
	Spec json.RawMessage `json:"spec"`
	// Team and Task make a team-file scenario: a team AgentChat dumped
	// (teams.py), posted to agentd as {"task", "team"}.
	Team        json.RawMessage   `json:"team"`
	Task        json.RawMessage   `json:"task"`
	Script      []scriptReply     `json:"script"`
	ToolResults map[string]string `json:"tool_results"`
	HistoryTask string            `json:"history_task"`
	// Runs are the chat's runs after the first (the spec's task), each
	// posted once the one before it has ended.
	Runs []runRequest `json:"runs"`
	// HTTPEchoPort is the port of 127.0.0.1 the team's HttpTools call,
	// where the recorder served its echo API; agentd's tools are pointed
	// at an echo of this test's (see httpEcho).
	HTTPEchoPort int `json:"http_echo_port"`
}

// httpEcho answers as record.py's EchoHandler does: a JSON object whose
// "echo" is the request's method, path, query and JSON body (keys sorted,
// compact), so that a tool result shows exactly what the tool sent.
func httpEcho(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	canon := ""
	if len(b) > 0 {
		var v any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			http.Error(w, "body is not JSON: "+err.Error(), http.StatusBadRequest)
			return
		}
		var out bytes.Buffer
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(v) // map keys sorted, compact, as json.dumps(sort_keys=True, separators=(",", ":"))
		canon = strings.TrimSuffix(out.String(), "\n")
	}
	var echo bytes.Buffer
	enc := json.NewEncoder(&echo)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]string{"echo": r.Method + " " + r.URL.Path + "?" + r.URL.RawQuery + " " + canon})
	w.Header().Set("Content-Type", "application/json")
	// json.dumps writes ": " after a member's name; the object has one.
	_, _ = w.Write(bytes.Replace(bytes.TrimSuffix(echo.Bytes(), []byte("\n")), []byte(`{"echo":`), []byte(`{"echo": `), 1))
}

// runRequest is one further run: its task as the runs API takes it
// (absent or null: no task) and, for a run AgentChat refuses, the
// exception it raised.
type runRequest struct {
	Task   json.RawMessage `json:"task"`
	Raises string          `json:"raises"`
}

type scriptReply struct {
	Content string `json:"content"`
	// ReasoningContent is sent as the reply's reasoning_content.
	ReasoningContent string `json:"reasoning_content"`
	ToolCalls        []struct {
		ID        string `json:"id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"tool_calls"`
	Usage *openaitest.Usage `json:"usage"`
	// Stop: the client asks the run to stop while this request is in
	// flight.
	Stop bool `json:"stop"`
	// Agent, when set, makes this the reply to the next request of that
	// agent (told apart by its system message); DelayMS holds the answer
	// back that long after the request came.
	Agent   string `json:"agent"`
	DelayMS int    `json:"delay_ms"`
}

// fixture is a file of testdata/: what AgentChat did.
type fixture struct {
	History  []entry           `json:"history"`
	Requests []json.RawMessage `json:"requests"`
	// Arrivals, for a scenario whose requests may overlap, is each
	// request's agent and the earlier requests still unanswered when it
	// came: requests are then compared by compareConcurrent.
	Arrivals   []arrival   `json:"arrivals"`
	Transcript []entry     `json:"transcript"`
	StopReason string      `json:"stop_reason"`
	Runs       []runResult `json:"runs"`
}

// arrival is how a model request came: the agent that made it and the
// indices of the earlier requests not yet answered then.
type arrival struct {
	Agent string `json:"agent"`
	Open  []int  `json:"open"`
}

// runResult is what AgentChat did with a further run: its transcript and
// stop text, or the error it refused the run with. FirstRequest is the
// index in Requests of the run's first model request.
type runResult struct {
	FirstRequest int     `json:"first_request"`
	Transcript   []entry `json:"transcript"`
	StopReason   string  `json:"stop_reason"`
	Error        *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// entry is one message of a transcript, as AgentChat has it.
type entry struct {
	Source  string `json:"source"`
	Type    string `json:"type"`
	Content any    `json:"content"`
	Target  string `json:"target,omitempty"`
	// Structured is a StructuredMessage's object, as model_dump_json
	// writes it.
	Structured string `json:"structured,omitempty"`
	// Team is, for a message of a team agent's inner team, the team
	// agent's name: AgentChat's SocietyOfMindAgent yields its inner
	// team's messages into the outer transcript (the recorder marks them
	// by their source), and agentd's log has them with team in their data.
	Team string `json:"team,omitempty"`
}

// run is what agentd did with a scenario.
type run struct {
	requests [][]byte
	// open is, for each request, the earlier ones not yet answered when it
	// came.
	open       [][]int
	transcript []entry
	stop       string
	runs       []furtherRun
}

// furtherRun is what agentd did with a further run; refusal is the text
// it refused the run with.
type furtherRun struct {
	firstRequest int
	transcript   []entry
	stop         string
	refusal      string
}

func TestGoldenRunsOfAutoGen(t *testing.T) {
	for _, name := range golden.Scenarios(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sc, want := load(t, name)
			if sc.Team == nil {
				got := runAgentd(t, sc, want, nil)
				for _, d := range compare(want, got) {
					t.Error(d)
				}
				return
			}
			// A team file's tools run in the sandbox: on each backend.
			for _, backend := range []string{sandbox.BackendDocker, sandbox.BackendBwrap} {
				t.Run(backend, func(t *testing.T) {
					t.Parallel()
					got := runAgentd(t, sc, want, golden.Sandbox(t, backend))
					for _, d := range compare(want, got) {
						t.Error(d)
					}
				})
			}
		})
	}
}

// TestGoldenComparisonSeesEveryByte changes one byte of each part of a
// fixture and checks that compare reports it, and that what may differ
// (model name, streaming options) is ignored: the golden test cannot pass
// over a difference in a request, a transcript entry or a stop text.
func TestGoldenComparisonSeesEveryByte(t *testing.T) {
	_, want := load(t, "tools_then_others")
	edit := func(i int, old, new string) func(*run) {
		return func(r *run) {
			b := bytes.Replace(r.requests[i], []byte(old), []byte(new), 1)
			if bytes.Equal(b, r.requests[i]) {
				t.Fatalf("request %d has no %s", i, old)
			}
			r.requests[i] = b
		}
	}
	checkNoticed(t, want, []changeCase{
		{"a system message", edit(1, "You plan.", "You plan!"), true},
		{"a tool description", edit(0, "Weather for a city.", "Weather for a city!"), true},
		{"a tool call id", edit(2, `"call_w"`, `"call_x"`), true},
		{"a message name", edit(1, `"name": "scout"`, `"name": "scoot"`), true},
		{"a request fewer", func(r *run) { r.requests = r.requests[:len(r.requests)-1] }, true},
		{"a transcript content", func(r *run) { r.transcript[len(r.transcript)-1].Content = "Bring a blanket!" }, true},
		{"a transcript type", func(r *run) { r.transcript[3].Type = "TextMessage" }, true},
		{"a transcript source", func(r *run) { r.transcript[3].Source = "planner" }, true},
		{"a transcript team", func(r *run) { r.transcript[3].Team = "panel" }, true},
		{"the stop text", func(r *run) { r.stop += "!" }, true},
		{"the model name", edit(0, `"gpt-4o-mini"`, `"other-model"`), false},
		{"streaming", edit(0, `"stream": false`, `"stream": true, "stream_options": {"include_usage": true}`), false},
	})
}

// TestGoldenNormalisationDependsOnValues pins the two rules of normalize
// that depend on a value: only a tool's "strict": false may be left out
// (a handoff tool's "strict": true is part of the request), and only a
// tool-call message's null content (a tool-call message with text, as
// AgentChat sends its thought, keeps it). Each rule applied to the other
// value would hide a real difference.
func TestGoldenNormalisationDependsOnValues(t *testing.T) {
	_, want := load(t, "swarm_handoff_with_tool")
	// edit changes request i as JSON; find names the part it changes, so
	// that a fixture without it fails here rather than passing unchanged.
	edit := func(i int, find func(map[string]any) map[string]any, change func(map[string]any)) func(*run) {
		return func(r *run) {
			var m map[string]any
			if err := json.Unmarshal(r.requests[i], &m); err != nil {
				t.Fatal(err)
			}
			part := find(m)
			if part == nil {
				t.Fatalf("request %d has no such part", i)
			}
			change(part)
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			r.requests[i] = b
		}
	}
	tool := func(name string) func(map[string]any) map[string]any {
		return func(m map[string]any) map[string]any {
			tools, _ := m["tools"].([]any)
			for _, x := range tools {
				if f, _ := x.(map[string]any)["function"].(map[string]any); f != nil && f["name"] == name {
					return f
				}
			}
			return nil
		}
	}
	toolCallMessage := func(content any) func(map[string]any) map[string]any {
		return func(m map[string]any) map[string]any {
			msgs, _ := m["messages"].([]any)
			for _, x := range msgs {
				if msg, _ := x.(map[string]any); msg != nil && msg["tool_calls"] != nil && msg["content"] == content {
					return msg
				}
			}
			return nil
		}
	}
	checkNoticed(t, want, []changeCase{
		{"a handoff tool's strict: true left out",
			edit(0, tool("transfer_to_planner"), func(f map[string]any) { delete(f, "strict") }), true},
		{"a handoff tool's strict: true made false",
			edit(0, tool("transfer_to_planner"), func(f map[string]any) { f["strict"] = false }), true},
		{"a tool's strict: false left out",
			edit(0, tool("get_weather"), func(f map[string]any) { delete(f, "strict") }), false},
		{"a tool-call message's text made null",
			edit(1, toolCallMessage("Checking, then passing on."), func(msg map[string]any) { msg["content"] = nil }), true},
		{"a tool-call message's text left out",
			edit(1, toolCallMessage("Checking, then passing on."), func(msg map[string]any) { delete(msg, "content") }), true},
		{"a tool-call message's text changed",
			edit(1, toolCallMessage("Checking, then passing on."), func(msg map[string]any) { msg["content"] = "Checking." }), true},
	})
	// And the other way: a tool-call message's null content may be left
	// out (go-openai omits it), but not be made text.
	_, nulls := load(t, "tools_then_others")
	checkNoticed(t, nulls, []changeCase{
		{"a tool-call message's null content left out",
			edit(2, toolCallMessage(nil), func(msg map[string]any) { delete(msg, "content") }), false},
		{"a tool-call message's null content made text",
			edit(2, toolCallMessage(nil), func(msg map[string]any) { msg["content"] = "Checking." }), true},
	})
}

// changeCase is a change to agentd's run of a fixture, and whether compare
// must report it.
type changeCase struct {
	name    string
	change  func(*run)
	noticed bool
}

// checkNoticed applies each change to a run that equals the fixture and
// checks that compare reports it, or not.
func checkNoticed(t *testing.T, want fixture, cases []changeCase) {
	t.Helper()
	same := run{stop: want.StopReason, transcript: want.Transcript}
	for _, r := range want.Requests {
		same.requests = append(same.requests, r)
	}
	if d := compare(want, same); len(d) != 0 {
		t.Fatalf("a fixture differs from itself: %v", d)
	}
	for _, tc := range cases {
		r := run{stop: same.stop, requests: slices.Clone(same.requests), transcript: slices.Clone(same.transcript)}
		tc.change(&r)
		if d := compare(want, r); (len(d) > 0) != tc.noticed {
			t.Errorf("%s: noticed %v, want %v (%v)", tc.name, len(d) > 0, tc.noticed, d)
		}
	}
}

// TestGoldenComparisonSeesEveryRun does the same for the parts of further
// runs: each run's transcript, stop text, first request and refusal.
func TestGoldenComparisonSeesEveryRun(t *testing.T) {
	_, want := load(t, "runs_swarm_user_string_error")
	if len(want.Runs) != 4 || want.Runs[0].Error == nil || want.Runs[3].Error != nil {
		t.Fatalf("the fixture is not three refused runs and one that ran: %+v", want.Runs)
	}
	same := func() run {
		r := run{stop: want.StopReason, transcript: want.Transcript}
		for _, b := range want.Requests {
			r.requests = append(r.requests, b)
		}
		for _, w := range want.Runs {
			g := furtherRun{firstRequest: w.FirstRequest, transcript: slices.Clone(w.Transcript), stop: w.StopReason}
			if w.Error != nil {
				g.refusal = w.Error.Message
			}
			r.runs = append(r.runs, g)
		}
		return r
	}
	if d := compare(want, same()); len(d) != 0 {
		t.Fatalf("a fixture differs from itself: %v", d)
	}
	for _, tc := range []struct {
		name   string
		change func(*run)
	}{
		{"a run's transcript content", func(r *run) { r.runs[3].transcript[0].Content = "Invoice 43." }},
		{"a run's handoff target", func(r *run) { r.runs[3].transcript[0].Target = "billing" }},
		{"a run's stop text", func(r *run) { r.runs[3].stop += "!" }},
		{"a run's first request", func(r *run) { r.runs[3].firstRequest++ }},
		{"a refusal's text", func(r *run) { r.runs[0].refusal = strings.Replace(r.runs[0].refusal, "user", "User", 1) }},
		{"a refused run that ran", func(r *run) { r.runs[1].refusal, r.runs[1].stop = "", "Maximum number of turns 10 reached." }},
		{"a run that was refused", func(r *run) { r.runs[3].refusal = "no" }},
		{"a refused run's task in the thread", func(r *run) {
			r.runs[0].transcript = []entry{{Source: "user", Type: "TextMessage", Content: "Invoice 42."}}
		}},
		{"a run fewer", func(r *run) { r.runs = r.runs[:3] }},
	} {
		r := same()
		tc.change(&r)
		if d := compare(want, r); len(d) == 0 {
			t.Errorf("%s changed: not noticed", tc.name)
		}
	}
}

func load(t *testing.T, name string) (scenario, fixture) {
	t.Helper()
	var sc scenario
	var fx fixture
	golden.Load(t, name, &sc, &fx)
	return sc, fx
}

// runAgentd runs the scenario through agentd: the openai provider against
// openaitest answering from the script, tools served over HTTP with the
// scenario's results.
func runAgentd(t *testing.T, sc scenario, fx fixture, sandboxes chat.Sandboxes) run {
	tools := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Name string `json:"name"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		res, ok := sc.ToolResults[body.Name]
		if !ok {
			res = body.Name + " ok"
		}
		_, _ = io.WriteString(w, res)
	}))
	t.Cleanup(tools.Close)

	body := []byte(sc.Spec)
	if sc.Team != nil {
		// Translated as POST /v1/chats translates {"task", "team"}.
		req, err := component.ParseRequest([]byte(`{"task": `+string(sc.Task)+`, "team": `+string(sc.Team)+`}`), nil)
		if err != nil {
			t.Fatalf("translate the team: %v", err)
		}
		body = req.Spec
	}
	body = bytes.ReplaceAll(body, []byte("TOOL_URL"), []byte(tools.URL))
	if sc.HTTPEchoPort != 0 {
		echo := httptest.NewServer(http.HandlerFunc(httpEcho))
		t.Cleanup(echo.Close)
		body = bytes.ReplaceAll(body, []byte(fmt.Sprintf("http://127.0.0.1:%d/", sc.HTTPEchoPort)), []byte(echo.URL+"/"))
	}
	if len(fx.History) > 0 {
		body = withHistory(t, body, fx.History)
	}

	// The model server: the script served as record.py serves it, with
	// the scenario's stop requests made while their requests are in
	// flight.
	var (
		rt      *runtime.Runtime
		db      store.DB
		chatID  string
		created = make(chan struct{})
	)
	script := newScriptServer(t, sc, body, func(i int) {
		<-created
		if _, stopped, err := rt.StopRun(context.Background(), "", chatID, ""); err != nil || !stopped {
			t.Errorf("stop at request %d: stopped %v, %v", i, stopped, err)
		}
	})
	models := httptest.NewServer(script)
	t.Cleanup(models.Close)

	ctx := context.Background()
	rt, db = golden.Runtime(t, models.URL+"/v1", sandboxes)
	c, _, err := rt.Create(ctx, &chat.CreateParams{Body: body})
	if c != nil {
		chatID = c.ID
		if sandboxes != nil {
			// Before the sandbox's work root goes (cleanups run last first).
			t.Cleanup(func() { _ = sandboxes.Release(context.Background(), c.ID) })
		}
	}
	close(created)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	// ended waits until run n of the chat has ended.
	ended := func(n int) *chat.Chat { return golden.Ended(t, rt, chatID, n, 20*time.Second) }
	c = ended(1)
	if c.Status != chat.StatusCompleted {
		t.Errorf("run 1 %s: %s", c.Status, c.Error)
	}
	out := run{stop: c.StopDetail}
	// Each further run is posted once the one before has ended, as
	// AgentChat's team.run is called again once it has returned. A run
	// agentd refuses at once (422) gets no number.
	numbers := make([]int, len(sc.Runs))
	for i, rr := range sc.Runs {
		fr := furtherRun{firstRequest: script.count()}
		req := map[string]json.RawMessage{}
		if len(rr.Task) > 0 {
			req["task"] = rr.Task
		}
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		_, n, err := rt.SubmitRun(ctx, "", chatID, "", agentdspec.DecodeRunRequest(b))
		var invalid *agentdspec.ValidationError
		switch {
		case errors.As(err, &invalid):
			var msgs []string
			for _, p := range invalid.Problems {
				msgs = append(msgs, p.Message)
			}
			fr.refusal = strings.Join(msgs, "\n")
		case err != nil:
			t.Fatalf("run %d: %v", i+2, err)
		default:
			numbers[i] = n
			c = ended(n)
			fr.stop = c.StopDetail
			switch c.Status {
			case chat.StatusCompleted:
			case chat.StatusFailed:
				// A run that cannot start ends failed with the reason.
				fr.refusal = c.Error
			default:
				t.Errorf("run %d %s: %s", n, c.Status, c.Error)
			}
		}
		out.runs = append(out.runs, fr)
	}

	evs, err := db.ListEvents(ctx, &chat.ListEventsParams{ChatID: chatID, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	// The messages of each run are those after its run.started; those
	// before run 1 are the resumed history, not part of any TaskResult.
	byRun := map[int][]chat.Message{}
	teams := map[int][]string{} // each message's team (inner messages)
	current := 0
	for _, e := range evs {
		if e.Type == chat.EventRunStarted {
			var d struct {
				Run int `json:"run"`
			}
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatalf("run.started %s: %v", e.Data, err)
			}
			current = d.Run
			continue
		}
		if m, ok := chat.MessageFromEvent(e); ok {
			byRun[current] = append(byRun[current], m)
			var d struct {
				Team string `json:"team"`
			}
			_ = json.Unmarshal(e.Data, &d)
			teams[current] = append(teams[current], d.Team)
		}
	}
	if h := len(byRun[0]); h != len(fx.History) {
		t.Errorf("%d messages of history before run 1, AgentChat's %d", h, len(fx.History))
	}
	out.transcript = transcriptOf(byRun[1], teams[1])
	for i, n := range numbers {
		if n > 0 {
			out.runs[i].transcript = transcriptOf(byRun[n], teams[n])
		}
	}
	out.requests, out.open = script.log()
	return out
}

// withHistory sets the spec's messages to the earlier run AgentChat made.
func withHistory(t *testing.T, spec []byte, history []entry) []byte {
	var m map[string]any
	if err := json.Unmarshal(spec, &m); err != nil {
		t.Fatal(err)
	}
	var msgs []map[string]any
	for _, e := range history {
		switch e.Type {
		case "TextMessage", "ToolCallSummaryMessage":
			role := "assistant"
			if e.Source == "user" {
				role = "user"
			}
			m := map[string]any{"role": role, "name": e.Source, "content": e.Content}
			if e.Type != "TextMessage" {
				m["type"] = e.Type
			}
			msgs = append(msgs, m)
		case "ToolCallRequestEvent":
			var calls []map[string]any
			for _, c := range e.Content.([]any) {
				c := c.(map[string]any)
				calls = append(calls, map[string]any{"id": c["id"], "type": "function",
					"function": map[string]any{"name": c["name"], "arguments": c["arguments"]}})
			}
			msgs = append(msgs, map[string]any{"role": "assistant", "name": e.Source, "tool_calls": calls})
		case "ToolCallExecutionEvent":
			var res []map[string]any
			for _, c := range e.Content.([]any) {
				c := c.(map[string]any)
				res = append(res, map[string]any{"tool_call_id": c["call_id"], "role": "tool", "content": c["content"]})
			}
			msgs = append(msgs, map[string]any{"role": "tool", "name": e.Source, "tool_responses": res})
		default:
			t.Fatalf("history entry of type %s has no spec form", e.Type)
		}
	}
	m["messages"] = msgs
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// transcriptOf writes agentd's messages the way AgentChat's TaskResult has
// them. Only the representation changes: a model reply with both text and
// tool calls is one message in agentd and a ThoughtEvent followed by a
// ToolCallRequestEvent in AgentChat; a reply's thought is a field of its
// message in agentd and a ThoughtEvent before it in AgentChat; a tool result's function name, which
// AgentChat repeats in each result, is the name of the call it answers.
//
// A StructuredMessage's type is compared as agentd writes it: AgentChat's
// class name, which names the content's type (StructuredMessage[Plan]).
// teams holds each message's team ("" for none), which every entry made of
// the message carries.
func transcriptOf(msgs []chat.Message, teams []string) []entry {
	names := map[string]string{}
	var out []entry
	for i, m := range msgs {
		team := teams[i]
		e := entry{Source: m.Name, Type: m.Type, Content: m.Content, Target: m.Handoff, Structured: string(m.Structured), Team: team}
		switch {
		case agentdspec.IsStructuredMessage(m.Type):
			if m.Thought != "" {
				out = append(out, entry{Source: m.Name, Type: "ThoughtEvent", Content: m.Thought, Team: team})
			}
		case m.Type == "ToolCallRequestEvent":
			if m.Content != "" {
				out = append(out, entry{Source: m.Name, Type: "ThoughtEvent", Content: m.Content, Team: team})
			}
			var calls []any
			for _, c := range m.ToolCalls {
				names[c.ID] = c.Function.Name
				calls = append(calls, map[string]any{"arguments": c.Function.Arguments, "id": c.ID, "name": c.Function.Name})
			}
			e.Content = calls
		case m.Type == "ToolCallExecutionEvent":
			var res []any
			for _, r := range m.ToolResponses {
				res = append(res, map[string]any{"call_id": r.ToolCallID, "content": r.Content, "is_error": r.IsError, "name": names[r.ToolCallID]})
			}
			e.Content = res
		default:
			// A reply's reasoning: AgentChat's ThoughtEvent before it.
			if m.Thought != "" {
				out = append(out, entry{Source: m.Name, Type: "ThoughtEvent", Content: m.Thought, Team: team})
			}
		}
		out = append(out, e)
	}
	return out
}

// normalize removes what may legitimately differ between AgentChat's request
// and agentd's: the model name (the scenario's, sent as the operator maps
// it) and whether and how the reply is streamed. It also writes two values
// that the API reads as absent the way go-openai writes them (it omits
// them): a tool's "strict": false and an assistant tool-call message's
// "content": null.
func normalize(body []byte) (string, error) {
	m, err := golden.Request(body)
	if err != nil {
		return "", err
	}
	if tools, ok := m["tools"].([]any); ok {
		for _, t := range tools {
			if f, ok := t.(map[string]any)["function"].(map[string]any); ok && f["strict"] == false {
				delete(f, "strict")
			}
		}
	}
	if msgs, ok := m["messages"].([]any); ok {
		for _, x := range msgs {
			if msg, ok := x.(map[string]any); ok && msg["content"] == nil && msg["tool_calls"] != nil {
				delete(msg, "content")
			}
			if msg, ok := x.(map[string]any); ok {
				parts, _ := msg["content"].([]any)
				for _, p := range parts {
					if img, ok := p.(map[string]any)["image_url"].(map[string]any); ok {
						url, err := pixelsOf(img["url"].(string))
						if err != nil {
							return "", err
						}
						img["url"] = url
					}
				}
			}
		}
	}
	out, err := json.MarshalIndent(m, "", " ")
	return string(out), err
}

// compare lists every difference between AgentChat's run and agentd's.
func compare(want fixture, got run) []string {
	var diffs []string
	if got.stop != want.StopReason {
		diffs = append(diffs, fmt.Sprintf("stop text:\n got  %q\n want %q", got.stop, want.StopReason))
	}
	if len(want.Arrivals) > 0 {
		diffs = append(diffs, compareConcurrent(want, got)...)
	}
	for i := 0; len(want.Arrivals) == 0 && i < max(len(want.Requests), len(got.requests)); i++ {
		if i >= len(got.requests) {
			w, _ := normalize(want.Requests[i])
			diffs = append(diffs, fmt.Sprintf("request %d missing; AgentChat sent:\n%s", i, w))
			continue
		}
		if i >= len(want.Requests) {
			g, _ := normalize(got.requests[i])
			diffs = append(diffs, fmt.Sprintf("request %d extra; agentd sent:\n%s", i, g))
			continue
		}
		w, err1 := normalize(want.Requests[i])
		g, err2 := normalize(got.requests[i])
		if err1 != nil || err2 != nil {
			diffs = append(diffs, fmt.Sprintf("request %d: %v %v", i, err1, err2))
			continue
		}
		if w != g {
			diffs = append(diffs, fmt.Sprintf("request %d differs:\n%s", i, lineDiff(w, g)))
		}
	}
	diffs = append(diffs, compareTranscript("transcript", want.Transcript, got.transcript)...)
	for i := 0; i < max(len(want.Runs), len(got.runs)); i++ {
		n := i + 2
		if i >= len(got.runs) {
			diffs = append(diffs, fmt.Sprintf("run %d missing", n))
			continue
		}
		if i >= len(want.Runs) {
			diffs = append(diffs, fmt.Sprintf("run %d extra", n))
			continue
		}
		w, g := want.Runs[i], got.runs[i]
		if w.FirstRequest != g.firstRequest {
			diffs = append(diffs, fmt.Sprintf("run %d starts at request %d, AgentChat's at %d", n, g.firstRequest, w.FirstRequest))
		}
		if w.Error != nil {
			if g.refusal != w.Error.Message {
				diffs = append(diffs, fmt.Sprintf("run %d: AgentChat refused it (%s):\n %q\nagentd: refusal %q, stop %q", n, w.Error.Type, w.Error.Message, g.refusal, g.stop))
			}
			diffs = append(diffs, compareTranscript(fmt.Sprintf("run %d (refused) transcript", n), nil, g.transcript)...)
			continue
		}
		if g.refusal != "" {
			diffs = append(diffs, fmt.Sprintf("run %d refused: %s", n, g.refusal))
			continue
		}
		if g.stop != w.StopReason {
			diffs = append(diffs, fmt.Sprintf("run %d stop text:\n got  %q\n want %q", n, g.stop, w.StopReason))
		}
		diffs = append(diffs, compareTranscript(fmt.Sprintf("run %d transcript", n), w.Transcript, g.transcript)...)
	}
	return diffs
}

func compareTranscript(what string, want, got []entry) []string {
	wt, _ := json.MarshalIndent(want, "", " ")
	gt, _ := json.MarshalIndent(got, "", " ")
	if bytes.Equal(wt, gt) {
		return nil
	}
	return []string{fmt.Sprintf("%s differs:\n%s", what, lineDiff(string(wt), string(gt)))}
}

// lineDiff is a unified-style diff of want and got by lines ("-" want,
// "+" got), with two lines of context around each change.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	// lcs[i][j] is the length of the longest common subsequence of w[i:], g[j:].
	lcs := make([][]int, len(w)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(g)+1)
	}
	for i := len(w) - 1; i >= 0; i-- {
		for j := len(g) - 1; j >= 0; j-- {
			if w[i] == g[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type line struct {
		op   byte
		text string
	}
	var lines []line
	i, j := 0, 0
	for i < len(w) || j < len(g) {
		switch {
		case i < len(w) && j < len(g) && w[i] == g[j]:
			lines = append(lines, line{' ', w[i]})
			i, j = i+1, j+1
		case j < len(g) && (i == len(w) || lcs[i][j+1] >= lcs[i+1][j]):
			lines = append(lines, line{'+', g[j]})
			j++
		default:
			lines = append(lines, line{'-', w[i]})
			i++
		}
	}
	var b strings.Builder
	last := -1
	for k, l := range lines {
		near := false
		for d := max(0, k-2); d <= min(len(lines)-1, k+2); d++ {
			near = near || lines[d].op != ' '
		}
		if !near {
			continue
		}
		if last >= 0 && k > last+1 {
			b.WriteString("  ...\n")
		}
		fmt.Fprintf(&b, "  %c %s\n", l.op, l.text)
		last = k
	}
	return b.String()
}

// pixelsOf stands for an image's data URL with its media type, size and
// the SHA-256 of its pixels (8-bit RGBA): PIL and Go write the same pixels
// as different PNG bytes (their compressors differ), so a model request's
// image is compared by what it shows.
func pixelsOf(url string) (string, error) {
	mediaType, payload, ok := strings.Cut(strings.TrimPrefix(url, "data:"), ";base64,")
	if !ok {
		return "", fmt.Errorf("image URL %.40q is not a base64 data URL", url)
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return "", err
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return "", err
	}
	r := img.Bounds()
	h := sha256.New()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
			h.Write([]byte{c.R, c.G, c.B, c.A})
		}
	}
	return fmt.Sprintf("%s %dx%d pixels sha256:%x", mediaType, r.Dx(), r.Dy(), h.Sum(nil)), nil
}
