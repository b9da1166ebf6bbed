package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/llm/openaitest"
)

// metricValue returns the value of the series of a Prometheus text
// exposition whose name and labels (in the exposition's order) are given,
// and whether it is there.
func metricValue(exposition, series string) (float64, bool) {
	for _, line := range strings.Split(exposition, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// scrape reads /metrics.
func (p *proc) scrape() string {
	p.t.Helper()
	code, _, body := p.do("GET", "/metrics", nil)
	if code != http.StatusOK {
		p.t.Fatalf("GET /metrics: %d %s", code, body)
	}
	return string(body)
}

// TestMetricsAndLogsTellTheStory runs chats with tools, a failing chat, an
// SSE viewer and a long poll against the real binary, then reads /metrics
// and the JSON log: tokens, tool calls by outcome, open streams and polls,
// build info; streams and polls not in the request duration histogram; and
// each chat's log lines, filtered by chat_id, tell its story.
func TestMetricsAndLogsTellTheStory(t *testing.T) {
	t.Parallel()
	tools := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/broken") {
			http.Error(w, "down for maintenance", http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, `{"temperature": 21}`)
	}))
	defer tools.Close()
	model := openaitest.New()
	defer model.Close()
	model.Reply(openaitest.Reply{ToolCalls: []openaitest.ToolCall{
		openaitest.Call("weather", `{"city": "Oslo"}`),
		openaitest.Call("broken", `{}`),
	}})
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_TOOL_ALLOW_PRIVATE=true", "OPENAI_BASE_URL="+model.URL(),
		"AGENTD_LOG_FORMAT=json", "AGENTD_LOG_LEVEL=info", "AGENTD_SANDBOX=none")

	// A chat with two tool calls, one of which fails (a tool error, not a
	// chat failure).
	tooled := p.create(fmt.Appendf(nil, `{"task": "weather", "max_round": 1,
		"tools": [{"name": "weather", "parameters": {"type": "object"}, "implementation": {"type": "http", "url": %q}},
		          {"name": "broken", "parameters": {"type": "object"}, "implementation": {"type": "http", "url": %q}}],
		"agents": [{"name": "a", "type": "assistant", "tools": ["weather", "broken"], "model": {"provider": "openai", "model": "gpt-test"}}]}`,
		tools.URL+"/weather", tools.URL+"/broken"))
	// A chat that fails: its replay script runs out on the second turn.
	failing := p.create([]byte(`{"task": "t", "max_round": 2,
		"agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay", "responses": ["only one"]}}]}`))
	tooledView := p.waitTerminal(tooled.ID, 60*time.Second)
	if tooledView.Status != "completed" {
		t.Fatalf("tool chat = %+v", tooledView)
	}
	if v := p.waitTerminal(failing.ID, 60*time.Second); v.Status != "failed" {
		t.Fatalf("failing chat = %+v", v)
	}

	// A slow chat with an SSE viewer and a long poll open on it.
	slow := p.create(slowSpec(1, 60000))
	events, stopStream := p.stream(slow.ID, 0)
	<-events // the stream is open once its first event arrived
	pollDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s/v1/chats/%s/messages?after=1000&wait_s=60", p.base, slow.ID), nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	var m string
	deadline := time.Now().Add(20 * time.Second)
	for {
		m = p.scrape()
		sse, _ := metricValue(m, "agentd_sse_streams_open")
		polls, _ := metricValue(m, "agentd_long_polls_open")
		if sse == 1 && polls == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("agentd_sse_streams_open = %v, agentd_long_polls_open = %v; want 1 and 1", sse, polls)
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, _, _ := p.do("POST", "/v1/chats/"+slow.ID+"/cancel", nil)
	if code != http.StatusAccepted {
		t.Fatalf("cancel: %d", code)
	}
	<-pollDone
	stopStream()
	p.waitTerminal(slow.ID, 30*time.Second)
	for deadline := time.Now().Add(10 * time.Second); ; {
		m = p.scrape()
		sse, _ := metricValue(m, "agentd_sse_streams_open")
		polls, _ := metricValue(m, "agentd_long_polls_open")
		if sse == 0 && polls == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the viewers left: agentd_sse_streams_open = %v, agentd_long_polls_open = %v", sse, polls)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Tokens: what the models reported, which the chats' usage adds up.
	var prompt, completion int
	for _, id := range []string{tooled.ID, failing.ID, slow.ID} {
		v := p.get(id)
		prompt, completion = prompt+v.Usage["prompt_tokens"], completion+v.Usage["completion_tokens"]
	}
	if tooledView.Usage["prompt_tokens"] == 0 {
		t.Errorf("the openai chat has no usage: %v", tooledView.Usage)
	}
	if got, _ := metricValue(m, `agentd_tokens_total{kind="prompt"}`); got != float64(prompt) {
		t.Errorf("agentd_tokens_total{kind=prompt} = %v, want the chats' %d", got, prompt)
	}
	if got, _ := metricValue(m, `agentd_tokens_total{kind="completion"}`); got != float64(completion) {
		t.Errorf("agentd_tokens_total{kind=completion} = %v, want the chats' %d", got, completion)
	}
	for series, want := range map[string]float64{
		`agentd_tool_calls_total{outcome="ok",type="http"}`:                             1,
		`agentd_tool_calls_total{outcome="tool_error",type="http"}`:                     1,
		fmt.Sprintf(`agentd_build_info{goversion=%q,version="dev"}`, runtime.Version()): 1,
		`agentd_chats{status="failed"}`:                                                 1,
	} {
		if got, ok := metricValue(m, series); !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	// SSE streams and long polls are not in the duration histogram; the
	// request counter has them.
	for _, route := range []string{"/v1/chats/{id}/events", "/v1/chats/{id}/messages"} {
		if strings.Contains(m, fmt.Sprintf(`agentd_http_request_duration_seconds_count{method="GET",route=%q}`, route)) {
			t.Errorf("%s is in agentd_http_request_duration_seconds:\n%s", route, grep(m, "agentd_http_request_duration_seconds_count"))
		}
		if !strings.Contains(m, fmt.Sprintf(`agentd_http_requests_total{code="200",method="GET",route=%q}`, route)) {
			t.Errorf("%s is not counted in agentd_http_requests_total", route)
		}
	}
	if !strings.Contains(m, `agentd_http_request_duration_seconds_count{method="GET",route="/v1/chats/{id}"}`) {
		t.Errorf("GET /v1/chats/{id} is missing from the duration histogram")
	}
	if b := m[strings.Index(m, "agentd_model_call_duration_seconds_bucket"):]; !strings.Contains(b, `le="120"`) {
		t.Errorf("model latency buckets do not reach 120 s")
	}
	promtool(t, m)

	// The JSON log, filtered by chat_id, tells each chat's story.
	story := func(id string) []map[string]any {
		var lines []map[string]any
		sc := bufio.NewScanner(strings.NewReader(p.logs.String()))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var l map[string]any
			if json.Unmarshal(sc.Bytes(), &l) == nil && l["chat_id"] == id {
				lines = append(lines, l)
			}
		}
		return lines
	}
	expect := func(id string, want ...string) []map[string]any {
		t.Helper()
		lines := story(id)
		var msgs []string
		for _, l := range lines {
			msgs = append(msgs, fmt.Sprint(l["msg"]))
		}
		i := 0
		for _, m := range msgs {
			if i < len(want) && m == want[i] {
				i++
			}
		}
		if i < len(want) {
			t.Errorf("log of chat %s: %q, want in order %q", id, msgs, want)
		}
		return lines
	}
	// The create's access line is written when its handler returns, while
	// the chat's worker is already running: it has no place in the order.
	lines := expect(tooled.ID, "chat created", "chat claimed", "tool call failed", "chat completed")
	if !slices.ContainsFunc(lines, func(l map[string]any) bool {
		return l["msg"] == "http request" && l["route"] == "/v1/chats" && l["method"] == "POST"
	}) {
		t.Errorf("no access line for the create of chat %s", tooled.ID)
	}
	for _, l := range lines {
		if l["msg"] == "chat completed" && (l["stop_reason"] != "max_round" || l["stop_detail"] == "") {
			t.Errorf("completion line without its stop reason: %v", l)
		}
		if l["msg"] == "http request" && l["route"] == "/v1/chats" && l["method"] == "POST" && l["status"] != float64(201) {
			t.Errorf("create access line: %v", l)
		}
	}
	for _, l := range expect(failing.ID, "chat created", "chat claimed", "chat failed") {
		if l["msg"] == "chat failed" && (l["stop_reason"] != "error" || !strings.Contains(fmt.Sprint(l["error"]), "replay")) {
			t.Errorf("failure line: %v", l)
		}
	}
	expect(slow.ID, "chat created", "chat claimed", "http request", "chat cancelled")
	if strings.Contains(p.logs.String(), `"route":"/healthz"`) {
		t.Errorf("health checks are logged at info")
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// promtool checks an exposition with `promtool check metrics` (the Debian
// prometheus package has it).
func promtool(t *testing.T, exposition string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Run("promtool", func(t *testing.T) { missing(t, "promtool is not installed (apt-get install prometheus)") })
		return
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = strings.NewReader(exposition)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

var lockedRE = regexp.MustCompile(`another agentd process is using this data directory`)

// TestSecondAgentdOnTheSameDataDirExits starts two servers on one SQLite
// data directory: the second must exit at once with a clear error.
func TestSecondAgentdOnTheSameDataDirExits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := startAgentd(t, "AGENTD_DATA_DIR="+dir, "AGENTD_SANDBOX=none")
	cmd := exec.Command(binPath)
	cmd.Env = append(os.Environ(), "AGENTD_ADDR=127.0.0.1:0", "AGENTD_DATA_DIR="+dir, "AGENTD_SANDBOX=none")
	if stderr := refusesToStart(t, "the second agentd on the same data dir", cmd); !lockedRE.MatchString(stderr) {
		t.Fatalf("second agentd's error does not say why:\n%s", stderr)
	}
	// The first one still serves.
	if code, _, _ := first.do("GET", "/readyz", nil); code != http.StatusOK {
		t.Fatalf("first agentd /readyz: %d", code)
	}
}

// TestReadOnlyDatabaseFailsAtStart starts agentd on a database file it may
// not write: it must refuse to start rather than report ready and answer
// 500. As root (who may write anything) it runs as nobody.
func TestReadOnlyDatabaseFailsAtStart(t *testing.T) {
	t.Parallel()
	base, err := os.MkdirTemp("", "agentd-e2e-ro-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(base)
	dataDir := filepath.Join(base, "data")
	if err := os.Mkdir(dataDir, 0o777); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(binPath, "migrate", "-data-dir", dataDir).CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	for _, f := range []string{"agentd.lock", "agentd.db"} {
		_ = os.Chmod(filepath.Join(dataDir, f), 0o666)
	}
	if err := os.Chmod(filepath.Join(dataDir, "agentd.db"), 0o444); err != nil {
		t.Fatal(err)
	}
	// The directory stays writable: only the database file is read-only.
	if err := os.Chmod(dataDir, 0o777); err != nil {
		t.Fatal(err)
	}
	bin := binPath
	cmd := exec.Command(bin, "serve")
	if os.Geteuid() == 0 {
		// nobody needs a binary it can reach: a copy in a world-readable dir.
		if err := os.Chmod(base, 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(binPath)
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(base, "agentd")
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd = exec.Command(bin, "serve")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + base, "AGENTD_ADDR=127.0.0.1:0", "AGENTD_DATA_DIR=" + dataDir,
		"AGENTD_SANDBOX=none", "AGENTD_MIGRATE=false"}
	if stderr := refusesToStart(t, "agentd on a read-only database", cmd); !strings.Contains(stderr, "cannot be written") {
		t.Fatalf("the error does not say the database cannot be written:\n%s", stderr)
	}
}

// TestTheCollectorHasAFloor checks that the binary raises GOGC while its
// heap is small (AGENTD_GC_HEAP_FLOOR_BYTES, 32 MiB by default) and that
// 0 leaves GOGC alone.
func TestTheCollectorHasAFloor(t *testing.T) {
	t.Parallel()
	gogc := func(p *proc) float64 {
		v, ok := metricValue(p.scrape(), "go_gc_gogc_percent")
		if !ok {
			t.Fatal("no go_gc_gogc_percent in /metrics")
		}
		return v
	}
	floored := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none", "GOGC=100")
	deadline := time.Now().Add(10 * time.Second)
	for gogc(floored) <= 100 {
		if time.Now().After(deadline) {
			t.Fatalf("go_gc_gogc_percent = %v with the default floor, want more than 100", gogc(floored))
		}
		time.Sleep(50 * time.Millisecond)
	}
	plain := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none", "AGENTD_GC_HEAP_FLOOR_BYTES=0", "GOGC=100")
	time.Sleep(500 * time.Millisecond)
	if v := gogc(plain); v != 100 {
		t.Errorf("go_gc_gogc_percent = %v with AGENTD_GC_HEAP_FLOOR_BYTES=0, want 100", v)
	}
}
