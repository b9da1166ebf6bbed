package e2e

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentd/agentd/internal/llm/openaitest"
)

// span is what the test receiver keeps of an exported span.
type span struct {
	name, traceID, spanID, parentID string
	attrs                           map[string]string
}

// otlpReceiver is an OTLP/HTTP trace receiver (protobuf encoding, as
// otlptracehttp sends it): it decodes every export and keeps the spans.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	rcv := &otlpReceiver{}
	rcv.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.Error(w, "not an OTLP trace export", http.StatusNotFound)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Errorf("OTLP receiver: undecodable export (Content-Type %s): %v", r.Header.Get("Content-Type"), err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rcv.mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					sp := span{name: s.GetName(), traceID: hex.EncodeToString(s.GetTraceId()), spanID: hex.EncodeToString(s.GetSpanId()),
						parentID: hex.EncodeToString(s.GetParentSpanId()), attrs: map[string]string{}}
					for _, kv := range s.GetAttributes() {
						sp.attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
					}
					rcv.spans = append(rcv.spans, sp)
				}
			}
		}
		rcv.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(rcv.srv.Close)
	return rcv
}

// trace returns the spans of one trace.
func (r *otlpReceiver) trace(traceID string) []span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []span
	for _, s := range r.spans {
		if s.traceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

// traceOfChat is the trace whose chat.run span belongs to the chat, "" if
// none arrived yet.
func (r *otlpReceiver) traceOfChat(chatID string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.spans {
		if s.name == "chat.run" && s.attrs["chat_id"] == chatID {
			return s.traceID
		}
	}
	return ""
}

// anySandbox returns the environment of one working code sandbox: bwrap
// when installed, else docker. Neither skips, and fails with CI=true.
func anySandbox(t *testing.T) []string {
	if _, err := exec.LookPath("bwrap"); err == nil {
		return []string{"AGENTD_SANDBOX=bwrap", "AGENTD_SANDBOX_WORK_ROOT=" + reachableDir(t)}
	}
	if err := exec.Command("podman", "image", "exists", "agentd-sandbox:latest").Run(); err == nil {
		return []string{"AGENTD_SANDBOX=docker"}
	}
	missing(t, "a code sandbox: install bubblewrap, or run Podman with the agentd-sandbox image")
	return nil
}

// TestTraceOfOneChat follows one chat through OpenTelemetry: the request
// that creates it, its run, its turn, a model call, an http and a sandbox
// tool call with the sandbox run, and its appends all arrive at an OTLP
// receiver as one trace with the right parents, and the model and the tool
// servers received the traceparent of the calls made to them.
func TestTraceOfOneChat(t *testing.T) {
	t.Parallel()
	sandboxEnv := anySandbox(t)
	rcv := newOTLPReceiver(t)
	var toolMu sync.Mutex
	var toolTraceparent string
	tools := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		toolMu.Lock()
		toolTraceparent = r.Header.Get("Traceparent")
		toolMu.Unlock()
		fmt.Fprint(w, `{"temperature": 21}`)
	}))
	defer tools.Close()
	model := openaitest.New()
	defer model.Close()
	model.Reply(openaitest.Reply{ToolCalls: []openaitest.ToolCall{
		openaitest.Call("weather", `{"city": "Oslo"}`),
		openaitest.Call("compute", `{"x": 6}`),
	}})

	spec := fmt.Appendf(nil, `{"task": "weather and a sum", "max_round": 1,
		"tools": [
		  {"name": "weather", "parameters": {"type": "object"}, "implementation": {"type": "http", "url": %q}},
		  {"name": "compute", "parameters": {"type": "object"}, "implementation": {"type": "sandbox", "language": "python",
		   "code": "import json, sys\nprint(json.load(sys.stdin)['x'] * 7)\n"}}],
		"agents": [{"name": "a", "type": "assistant", "tools": ["weather", "compute"],
		            "model": {"provider": "openai", "model": "gpt-test"}}]}`, tools.URL)
	env := append([]string{"AGENTD_DATA_DIR=" + t.TempDir(), "AGENTD_TOOL_ALLOW_PRIVATE=true", "OPENAI_BASE_URL=" + model.URL(),
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.srv.URL, "OTEL_BSP_SCHEDULE_DELAY=100"}, sandboxEnv...)
	p := startAgentd(t, env...)
	c := p.create(spec)
	final := p.waitTerminal(c.ID, 60*time.Second)
	if final.Status != "completed" {
		t.Fatalf("chat = %+v", final)
	}

	// Spans are exported in batches every 100 ms; wait until the chat's
	// whole trace is in.
	want := []string{"POST /v1/chats", "chat.run", "chat.turn", "model.call", "tool.call", "sandbox.exec", "chat.append"}
	var spans []span
	var byName map[string][]span
	deadline := time.Now().Add(30 * time.Second)
	for {
		byName = map[string][]span{}
		if id := rcv.traceOfChat(c.ID); id != "" {
			spans = rcv.trace(id)
			for _, s := range spans {
				byName[s.name] = append(byName[s.name], s)
			}
		}
		complete := len(byName["tool.call"]) == 2
		for _, n := range want {
			complete = complete && len(byName[n]) > 0
		}
		if complete {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the chat's trace is incomplete after 30 s; spans by name: %v", names(byName))
		}
		time.Sleep(100 * time.Millisecond)
	}

	one := func(name string) span {
		t.Helper()
		if len(byName[name]) != 1 {
			t.Fatalf("%d %s spans, want 1: %v", len(byName[name]), name, names(byName))
		}
		return byName[name][0]
	}
	create, run, turn, modelCall, exec := one("POST /v1/chats"), one("chat.run"), one("chat.turn"), one("model.call"), one("sandbox.exec")
	parent := func(child, par span) {
		t.Helper()
		if child.parentID != par.spanID {
			t.Errorf("%s's parent is %s, want %s (%s)", child.name, child.parentID, par.spanID, par.name)
		}
	}
	if create.parentID != "" && create.parentID != strings.Repeat("0", 16) {
		t.Errorf("the create request's span has a parent %s; the client sent no traceparent", create.parentID)
	}
	if create.attrs["chat_id"] != c.ID {
		t.Errorf("create span chat_id = %q, want %s", create.attrs["chat_id"], c.ID)
	}
	parent(run, create)
	parent(turn, run)
	parent(modelCall, turn)
	toolSpans := map[string]span{}
	for _, s := range byName["tool.call"] {
		parent(s, turn)
		toolSpans[s.attrs["gen_ai.tool.name"]] = s
	}
	parent(exec, toolSpans["compute"])
	for _, a := range byName["chat.append"] {
		if a.parentID != run.spanID && a.parentID != turn.spanID {
			t.Errorf("a chat.append span's parent is %s, neither the run nor the turn", a.parentID)
		}
	}

	// traceparent: version-traceid-spanid-flags, the span being the call's.
	reqs := model.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the model server saw %d requests, want 1", len(reqs))
	}
	if got, want := reqs[0].Header.Get("Traceparent"), "00-"+run.traceID+"-"+modelCall.spanID+"-01"; got != want {
		t.Errorf("model request traceparent = %q, want %q", got, want)
	}
	toolMu.Lock()
	defer toolMu.Unlock()
	if want := "00-" + run.traceID + "-" + toolSpans["weather"].spanID + "-01"; toolTraceparent != want {
		t.Errorf("tool request traceparent = %q, want %q", toolTraceparent, want)
	}
}

func names(byName map[string][]span) map[string]int {
	out := map[string]int{}
	for n, s := range byName {
		out[n] = len(s)
	}
	return out
}
