package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// The A2A agents of saved teams, driven by the official JavaScript client
// (@a2a-js/sdk, e2e/js/a2a.mjs) against the real binary.

// a2aKey is the bearer key of the tenant the A2A tests act for.
const a2aKey = "a2a-key-0123456789abcdef"

// a2aTeams are the saved teams the A2A tests talk to: echo answers each
// run in one reply; review's user_proxy asks a human; slow takes long.
var a2aTeams = map[string]string{
	"echo": `{"metadata": {"description": "Answers every task in one line."},
		"termination": {"text_mention": {"text": "TERMINATE"}},
		"agents": [{"name": "writer", "type": "assistant", "model": {"provider": "replay",
			"responses": ["first answer TERMINATE", "second answer TERMINATE"]}}]}`,
	"review": `{"max_round": 4, "agents": [
		{"name": "writer", "type": "assistant", "model": {"provider": "replay", "responses": ["draft one", "draft two"]}},
		{"name": "editor", "type": "user_proxy", "human_input_mode": "ALWAYS"}]}`,
	"slow": string(slowTeam(10, 1000)),
}

// slowTeam is two agents taking turns, each reply delayMS late.
func slowTeam(rounds, delayMS int) []byte {
	var a, b []string
	for i := range rounds {
		a = append(a, fmt.Sprintf(`{"content": "a-%d", "delay_ms": %d}`, i, delayMS))
		b = append(b, fmt.Sprintf(`{"content": "b-%d", "delay_ms": %d}`, i, delayMS))
	}
	return fmt.Appendf(nil, `{"max_round": %d,
		"agents": [{"name": "a", "type": "assistant", "model": "ma"}, {"name": "b", "type": "assistant", "model": "mb"}],
		"models": {"ma": {"provider": "replay", "responses": [%s]}, "mb": {"provider": "replay", "responses": [%s]}}}`,
		rounds, strings.Join(a, ","), strings.Join(b, ","))
}

// needA2AJS fails (CI) or skips without node and the pinned npm clients.
func needA2AJS(t *testing.T) {
	t.Helper()
	needJS(t)
	if _, err := os.Stat("js/node_modules/@a2a-js/sdk"); err != nil {
		msg := "e2e/js/node_modules/@a2a-js/sdk is missing (npm ci --prefix e2e/js)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + " (CI=true: a failure, not a skip)")
		}
		t.Skip(msg)
	}
}

// TestA2APushNotificationsAreTheChatsWebhook: the push config of a task's
// first message becomes its chat's webhook, whose signed deliveries reach
// a local receiver; the config methods read it.
func TestA2APushNotificationsAreTheChatsWebhook(t *testing.T) {
	needA2AJS(t)
	t.Parallel()
	rc := newHookReceiver(t)
	secret := whSecret(7)
	hook := rc.path("/a2a-push", secret)
	p := startA2A(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_WEBHOOK_SECRET="+secret, "AGENTD_TOOL_ALLOW_HOSTS=127.0.0.1:"+rc.port())
	r := runA2A(t, p.base, "push", "echo", hook)
	if r.Done.State != "TASK_STATE_COMPLETED" {
		t.Fatalf("task %+v", r.Done)
	}
	if r.Got.ID != "webhook" || r.Got.TaskID != r.Done.ID || r.Got.URL != hook || len(r.List) != 1 || r.List[0] != hook || r.Same != hook {
		t.Errorf("configs: get %+v, list %v, set again %q", r.Got, r.List, r.Same)
	}
	if r.Other != "UnsupportedOperationError" {
		t.Errorf("setting another URL: %s", r.Other)
	}
	// run.started and chat.completed arrive signed (the receiver checks
	// every signature), for the task's chat.
	var events []string
	for len(events) < 2 {
		d := rc.next("/a2a-push", 30*time.Second)
		if d.Body.ChatID != r.Done.ContextID {
			t.Errorf("delivery for chat %s, want %s", d.Body.ChatID, r.Done.ContextID)
		}
		events = append(events, d.Body.Event)
	}
	slices.Sort(events) // any replica delivers, in any order
	if !slices.Equal(events, []string{"chat.completed", "run.started"}) {
		t.Errorf("deliveries %v", events)
	}
}

// TestA2ASpeakerChoiceIsInputRequired: a team whose speakers are chosen
// by hand asks for each one as input-required, and the name sent in the
// task is the choice (plain JSON-RPC, as any client sends it).
func TestA2ASpeakerChoiceIsInputRequired(t *testing.T) {
	t.Parallel()
	p := startA2A(t, "AGENTD_DATA_DIR="+t.TempDir())
	pick := `{"speaker_selection": {"method": "manual"}, "max_round": 2, "agents": [
		{"name": "colours", "type": "assistant", "model": {"provider": "replay", "responses": ["Yellow."]}},
		{"name": "fruits", "type": "assistant", "model": {"provider": "replay", "responses": ["A banana."]}}]}`
	if code, _, resp := p.do("PUT", "/v1/teams/pick", []byte(pick)); code != http.StatusCreated {
		t.Fatalf("PUT pick: %d %s", code, resp)
	}
	type task struct {
		ID        string `json:"id"`
		ContextID string `json:"contextId"`
		Status    struct {
			State   string `json:"state"`
			Message struct {
				Parts []struct {
					Text string `json:"text"`
				} `json:"parts"`
				Metadata struct {
					PendingInput struct {
						Kind       string   `json:"kind"`
						Candidates []string `json:"candidates"`
					} `json:"pendingInput"`
				} `json:"metadata"`
			} `json:"message"`
		} `json:"status"`
	}
	send := func(extra, text string) task {
		t.Helper()
		body := `{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"messageId": "` + text + `", "role": "ROLE_USER", ` +
			extra + `"parts": [{"text": "` + text + `"}]}}}`
		code, _, resp := p.do("POST", "/a2a/pick", []byte(body))
		var r struct {
			Result struct {
				Task task `json:"task"`
			} `json:"result"`
			Error *struct{ Code int } `json:"error"`
		}
		mustUnmarshal(t, resp, &r)
		if code != http.StatusOK || r.Error != nil {
			t.Fatalf("send %q: %d %s", text, code, resp)
		}
		return r.Result.Task
	}
	asked := send("", "a colour, then a fruit of it")
	pi := asked.Status.Message.Metadata.PendingInput
	if asked.Status.State != "TASK_STATE_INPUT_REQUIRED" || pi.Kind != "speaker" || !slices.Equal(pi.Candidates, []string{"colours", "fruits"}) ||
		!strings.Contains(asked.Status.Message.Parts[0].Text, "colours, fruits") {
		t.Fatalf("asked %+v", asked)
	}
	again := send(`"taskId": "`+asked.ID+`", `, "colours")
	if again.ID != asked.ID || again.Status.State != "TASK_STATE_INPUT_REQUIRED" {
		t.Fatalf("after choosing colours %+v", again)
	}
	done := send(`"contextId": "`+asked.ContextID+`", `, "fruits")
	if done.ID != asked.ID || done.Status.State != "TASK_STATE_COMPLETED" || done.Status.Message.Parts[0].Text != "A banana." {
		t.Errorf("after choosing fruits %+v", done)
	}
}

// startA2A starts agentd with an API key and saves the A2A teams (a
// replica sharing a database with another finds them saved: 200).
func startA2A(t *testing.T, env ...string) *proc {
	t.Helper()
	// Read and write timeouts far below a run's length: the protocols'
	// calls and streams must outlast them.
	p := startAgentd(t, append(env, "AGENTD_SANDBOX=none", "AGENTD_API_KEYS="+a2aKey+":acme",
		"AGENTD_READ_TIMEOUT=1s", "AGENTD_WRITE_TIMEOUT=1s")...)
	p.auth = "Bearer " + a2aKey
	for name, body := range a2aTeams {
		if code, _, resp := p.do("PUT", "/v1/teams/"+name, []byte(body)); code != http.StatusCreated && code != http.StatusOK {
			t.Fatalf("PUT team %s: %d %s", name, code, resp)
		}
	}
	return p
}

// a2aTask is a task as a2a.mjs prints it.
type a2aTask struct {
	ID         string   `json:"id"`
	ContextID  string   `json:"contextId"`
	State      string   `json:"state"`
	StatusText string   `json:"statusText"`
	Artifacts  []string `json:"artifacts"`
	History    []struct {
		Role string `json:"role"`
		Text string `json:"text"`
	} `json:"history"`
}

// a2aEvent is a stream event as a2a.mjs prints it.
type a2aEvent struct {
	Kind      string `json:"kind"`
	ID        string `json:"id"`
	ContextID string `json:"contextId"`
	State     string `json:"state"`
	Text      string `json:"text"`
}

// a2aRun is everything a2a.mjs prints for one scenario.
type a2aRun struct {
	Card struct {
		Name      string   `json:"name"`
		Version   string   `json:"version"`
		Streaming bool     `json:"streaming"`
		URL       string   `json:"url"`
		Security  []string `json:"security"`
	} `json:"card"`
	First, Second, GetFirst, Asked, Answered, Done, Started, Canceled a2aTask
	Events                                                            []a2aEvent
	Again, Other, Same                                                string
	Got                                                               struct {
		ID     string `json:"id"`
		TaskID string `json:"taskId"`
		URL    string `json:"url"`
	}
	List []string
}

// runA2A runs one scenario of the official client against a team.
func runA2A(t *testing.T, base, scenario, team string, args ...string) a2aRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"js/a2a.mjs", base, a2aKey, scenario, team}, args...)...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("a2a.mjs %s %s: %v\n%s", scenario, team, err, stderr.String())
	}
	var r a2aRun
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("a2a.mjs %s: %v: %s", scenario, err, out)
	}
	return r
}

// TestA2AClientDrivesSavedTeams: card discovery, a blocking send that ends
// with the team's final message, a second message in the same context as
// the chat's run 2, a streamed send, a human's answer in the task that
// asked for it, and a cancel.
func TestA2AClientDrivesSavedTeams(t *testing.T) {
	needA2AJS(t)
	t.Parallel()
	backends(t, testA2AClient)
}

func testA2AClient(t *testing.T, env []string) {
	p := startA2A(t, env...)

	t.Run("send", func(t *testing.T) {
		t.Parallel()
		r := runA2A(t, p.base, "send", "echo")
		if r.Card.Name != "echo" || r.Card.Version != "1" || !r.Card.Streaming || r.Card.URL != p.base+"/a2a/echo" ||
			len(r.Card.Security) != 1 || r.Card.Security[0] != "bearer" {
			t.Errorf("card %+v", r.Card)
		}
		if r.First.State != "TASK_STATE_COMPLETED" || r.First.StatusText != "first answer TERMINATE" ||
			len(r.First.Artifacts) != 1 || r.First.Artifacts[0] != "first answer TERMINATE" {
			t.Errorf("first task %+v", r.First)
		}
		if r.Second.ContextID != r.First.ContextID || r.Second.ID == r.First.ID ||
			r.Second.State != "TASK_STATE_COMPLETED" || r.Second.StatusText != "second answer TERMINATE" {
			t.Errorf("second task %+v (first %s)", r.Second, r.First.ID)
		}
		if len(r.Second.History) != 2 || r.Second.History[0].Text != "second task" || r.Second.History[0].Role != "ROLE_USER" ||
			r.Second.History[1].Role != "ROLE_AGENT" {
			t.Errorf("second task's history %+v", r.Second.History)
		}
		if len(r.GetFirst.History) != 1 || r.GetFirst.History[0].Text != "first answer TERMINATE" || r.GetFirst.State != "TASK_STATE_COMPLETED" {
			t.Errorf("GetTask(historyLength 1) of the first task %+v", r.GetFirst)
		}
		// The context is one chat, which has run twice.
		var c struct {
			Run  int `json:"run"`
			Team struct {
				Name string `json:"name"`
			} `json:"team"`
			Status string `json:"status"`
		}
		code, _, body := p.do("GET", "/v1/chats/"+r.First.ContextID, nil)
		mustUnmarshal(t, body, &c)
		if code != http.StatusOK || c.Run != 2 || c.Team.Name != "echo" || c.Status != "completed" {
			t.Errorf("the context's chat: %d %s", code, body)
		}
		// The card and a call's answer are what the contract says.
		code, _, body = p.do("GET", "/a2a/echo/.well-known/agent-card.json", nil)
		if code != http.StatusOK {
			t.Fatalf("card: %d %s", code, body)
		}
		conforms(t, "A2AAgentCard", body)
		code, _, body = p.do("POST", "/a2a/echo", []byte(`{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "`+r.Second.ID+`", "historyLength": 0}}`))
		if code != http.StatusOK || !strings.Contains(string(body), `"state":"TASK_STATE_COMPLETED"`) || strings.Contains(string(body), `"history"`) {
			t.Errorf("GetTask with historyLength 0: %d %s", code, body)
		}
		conforms(t, "JSONRPCResponse", body)
		// Without the key: 401, as on /v1.
		saved := p.auth
		p.auth = ""
		if code, _, _ := p.do("GET", "/a2a/echo/.well-known/agent-card.json", nil); code != http.StatusUnauthorized {
			t.Errorf("card without a key: %d", code)
		}
		p.auth = saved
		// The calls are counted, under the route's pattern.
		metrics := p.metricsText()
		for _, want := range []string{`agentd_a2a_calls_total{method="SendMessage",outcome="ok"}`, `agentd_a2a_calls_total{method="AgentCard",outcome="ok"}`,
			`agentd_http_requests_total{code="200",method="POST",route="/a2a/{team}"}`} {
			if !strings.Contains(metrics, want) {
				t.Errorf("metrics lack %s:\n%s", want, grepLines([]byte(metrics), "agentd_"))
			}
		}
	})

	t.Run("stream", func(t *testing.T) {
		t.Parallel()
		r := runA2A(t, p.base, "stream", "echo")
		ev := r.Events
		// The stream starts from the task as it was sent, however fast
		// the team (on Postgres it has often finished by then).
		if len(ev) < 3 || ev[0].Kind != "task" || ev[0].ContextID == "" || ev[0].State != "TASK_STATE_SUBMITTED" {
			t.Fatalf("stream %+v", ev)
		}
		last := ev[len(ev)-1]
		if last.Kind != "status" || last.State != "TASK_STATE_COMPLETED" || last.Text != "first answer TERMINATE" {
			t.Errorf("the stream ends with %+v", last)
		}
		var working, artifact int
		for _, e := range ev[1 : len(ev)-1] {
			switch {
			case e.Kind == "status" && e.State == "TASK_STATE_WORKING":
				working++
			case e.Kind == "artifact" && e.Text == "first answer TERMINATE":
				artifact++
			default:
				t.Errorf("unexpected event %+v", e)
			}
		}
		if working == 0 || artifact != 1 {
			t.Errorf("stream %+v: %d working updates, %d artifacts", ev, working, artifact)
		}
	})

	t.Run("human", func(t *testing.T) {
		t.Parallel()
		r := runA2A(t, p.base, "human", "review")
		if r.Asked.State != "TASK_STATE_INPUT_REQUIRED" || !strings.Contains(r.Asked.StatusText, "Provide feedback") {
			t.Errorf("asked %+v", r.Asked)
		}
		// Answered in the task: the writer goes on and the human is asked
		// again, before the run ends.
		if r.Answered.ID != r.Asked.ID || r.Answered.State != "TASK_STATE_INPUT_REQUIRED" || len(r.Answered.History) != 4 ||
			r.Answered.History[2].Text != "one more pass" || r.Answered.History[3].Text != "draft two" {
			t.Errorf("after the first answer %+v", r.Answered)
		}
		// Answered in the context alone: it is the pending input's answer,
		// not a new task.
		if r.Done.ID != r.Asked.ID || r.Done.State != "TASK_STATE_COMPLETED" || r.Done.StatusText != "draft two" {
			t.Errorf("after the second answer %+v", r.Done)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		t.Parallel()
		r := runA2A(t, p.base, "cancel", "slow")
		if r.Started.State != "TASK_STATE_SUBMITTED" && r.Started.State != "TASK_STATE_WORKING" {
			t.Errorf("a non-blocking send answered %+v", r.Started)
		}
		if r.Canceled.ID != r.Started.ID || r.Canceled.State != "TASK_STATE_CANCELED" {
			t.Errorf("canceled %+v", r.Canceled)
		}
		if r.Again != "TaskNotCancelableError" {
			t.Errorf("cancelling again: %s", r.Again)
		}
		var c chatView
		_, _, body := p.do("GET", "/v1/chats/"+r.Started.ContextID, nil)
		mustUnmarshal(t, body, &c)
		if c.Status != "cancelled" {
			t.Errorf("the chat is %s", c.Status)
		}
	})
}
