package llm

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/llm/openaitest"
	"github.com/agentd/agentd/internal/spec"
)

// routingClient has endpoints of every kind, with and without globs, and a
// default.
func routingClient(t *testing.T) *Client {
	t.Helper()
	c, err := New(Config{Default: "gpt", Endpoints: []Endpoint{
		{Name: "gpt", Kind: KindOpenAI, APIKey: "k1", Models: []string{"gpt-*", "o?-mini"}},
		{Name: "local", Kind: KindOpenAI, BaseURL: "http://127.0.0.1:1/v1", Models: []string{"meta-llama/*"}},
		{Name: "any-openai", Kind: KindOpenAI, BaseURL: "http://127.0.0.1:2/v1"},
		{Name: "azure", Kind: KindAzure, BaseURL: "https://contoso.openai.azure.com", APIVersion: "2024-10-21", APIKey: "k2", Deployment: "gpt4o-prod"},
		{Name: "claude", Kind: KindAnthropic, APIKey: "k3", Models: []string{"claude-*"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestRouting: the endpoint a model names; else the first of its kind whose
// globs match; else the default; else the first of its kind without globs;
// else a problem that lists the endpoints.
func TestRouting(t *testing.T) {
	t.Parallel()
	c := routingClient(t)
	for _, tc := range []struct {
		provider, endpoint, model string
		want                      string // endpoint, or "/path: message part"
	}{
		{"openai", "", "gpt-4o", "gpt"},
		{"openai", "", "o3-mini", "gpt"},
		{"openai", "", "meta-llama/Llama-3.1-8B", "local"},
		{"openai", "", "qwen2.5", "any-openai"},
		{"openai", "local", "qwen2.5", "/model: endpoint \"local\" does not serve model \"qwen2.5\""},
		{"openai", "any-openai", "gpt-4o", "any-openai"},
		{"azure", "", "gpt-4o", "azure"},
		{"anthropic", "", "claude-sonnet-4-5", "claude"},
		{"anthropic", "", "gpt-4o", "/model: no endpoint of kind anthropic serves model \"gpt-4o\"; configured: \"gpt\" (openai: gpt-*, o?-mini)"},
		{"anthropic", "gpt", "claude-x", "/endpoint: endpoint \"gpt\" is of kind openai, not anthropic"},
		{"openai", "nope", "gpt-4o", "/endpoint: names no endpoint of this server: \"nope\"; configured: \"gpt\""},
	} {
		m := &spec.Model{Provider: tc.provider, Endpoint: tc.endpoint, Model: tc.model}
		probs := c.CheckModel(m)
		ep, err := c.router.route(m)
		if !strings.HasPrefix(tc.want, "/") {
			if len(probs) > 0 || err != nil || ep.cfg.Name != tc.want {
				t.Errorf("%s %s %q: probs %v, err %v, want endpoint %s", tc.provider, tc.endpoint, tc.model, probs, err, tc.want)
			}
			continue
		}
		path, msg, _ := strings.Cut(tc.want, ": ")
		if len(probs) != 1 || probs[0].Path != path || !strings.Contains(probs[0].Message, msg) {
			t.Errorf("%s %s %q: probs %v, want %s", tc.provider, tc.endpoint, tc.model, probs, tc.want)
		}
	}
	if got := strings.Join(c.Providers(), ","); got != "replay,openai,azure,anthropic" {
		t.Errorf("providers = %s", got)
	}
}

// TestCheckModelRefusesWhatAnthropicHasNot: sampling parameters, seed,
// response_format, penalties and reasoning_effort on an anthropic endpoint
// are 422s, not dropped (stop is not: it goes as stop_sequences).
func TestCheckModelRefusesWhatAnthropicHasNot(t *testing.T) {
	t.Parallel()
	c := routingClient(t)
	zero, seed := 0.0, 1
	probs := c.CheckModel(&spec.Model{Provider: "anthropic", Model: "claude-x", Temperature: &zero, TopP: &zero, Seed: &seed, ResponseFormat: []byte(`{"type":"json_object"}`),
		FrequencyPenalty: &zero, PresencePenalty: &zero, ReasoningEffort: "low", Stop: []string{"END"}})
	var paths []string
	for _, p := range probs {
		paths = append(paths, p.Path)
	}
	if strings.Join(paths, " ") != "/temperature /top_p /seed /response_format /frequency_penalty /presence_penalty /reasoning_effort" {
		t.Errorf("problems = %v", probs)
	}
}

// TestMatchEndpoint: team files' clients by base URL, Azure resource and
// deployment, or model.
func TestMatchEndpoint(t *testing.T) {
	t.Parallel()
	c := routingClient(t)
	for _, tc := range []struct {
		ref  ClientRef
		want string
	}{
		{ClientRef{Kind: KindOpenAI, Model: "whatever", BaseURL: "http://127.0.0.1:1/v1/"}, "local"},
		{ClientRef{Kind: KindOpenAI, Model: "gpt-4o"}, "gpt"},
		{ClientRef{Kind: KindAzure, Model: "gpt-4o", BaseURL: "HTTPS://contoso.openai.azure.com/", Deployment: "gpt4o-prod"}, "azure"},
		{ClientRef{Kind: KindAzure, Model: "gpt-4o", Deployment: "gpt4o-prod"}, "azure"},
		{ClientRef{Kind: KindAzure, Model: "gpt-4o", BaseURL: "https://contoso.openai.azure.com", Deployment: "other"}, ""},
		{ClientRef{Kind: KindOpenAI, Model: "x", BaseURL: "http://elsewhere/v1"}, ""},
		{ClientRef{Kind: KindAnthropic, Model: "claude-opus-4"}, "claude"},
	} {
		got, err := c.MatchEndpoint(tc.ref)
		if got != tc.want || (tc.want == "") != (err != nil) {
			t.Errorf("%+v: %q, %v; want %q", tc.ref, got, err, tc.want)
		}
		if err != nil && !strings.Contains(err.Error(), `"claude" (anthropic: claude-*)`) {
			t.Errorf("%+v: error does not list the endpoints: %v", tc.ref, err)
		}
	}
}

func TestEndpointValidation(t *testing.T) {
	t.Parallel()
	err := Config{Default: "missing", Endpoints: []Endpoint{
		{Name: "bad name!", Kind: "bedrock"},
		{Name: "az", Kind: KindAzure},
		{Name: "cl", Kind: KindAnthropic, BaseURL: "https://user:pw@example.com"},
		{Name: "h", Kind: KindOpenAI, Headers: map[string]string{"Authorization": "Bearer x"}, RPM: -1},
		{Name: "h", Kind: KindOpenAI},
		{Name: "h2-tls", Kind: KindOpenAI, BaseURL: "https://api.example.com/v1", H2C: true},
		{Name: "h2-default", Kind: KindOpenAI, H2C: true},
	}}.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`endpoint name "bad name!"`, `kind "bedrock"`, "base_url is required for kind azure", "api_version is required",
		`a key is required for kind azure`, "must not hold credentials", `header "Authorization" is set by agentd itself`,
		"must not be negative", `endpoint "h" is defined twice`, `default endpoint "missing"`,
		`endpoint "h2-tls": h2c is for an http:// base_url, not "https://api.example.com/v1"`, `endpoint "h2-default": h2c is for an http:// base_url, not "the default"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "pw@") {
		t.Errorf("error repeats credentials: %v", err)
	}
}

func TestGlobMatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		glob, s string
		want    bool
	}{
		{"gpt-*", "gpt-4o", true}, {"gpt-*", "gpt", false}, {"*", "a/b/c", true}, {"meta-llama/*", "meta-llama/x/y", true},
		{"o?-mini", "o3-mini", true}, {"o?-mini", "o33-mini", false}, {"*-mini", "gpt-4o-mini", true}, {"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false}, {"claude", "claude", true}, {"claude", "claude-3", false}, {"?", "é", true},
	} {
		if got := globMatch(tc.glob, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v", tc.glob, tc.s, got)
		}
	}
}

// TestSplitThought: reasoning_content wins; a leading <think> block is the
// thought; anything else is content.
func TestSplitThought(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ reasoning, content, thought, rest string }{
		{"", "Hello", "", "Hello"},
		{"I ponder.", "Hello", "I ponder.", "Hello"},
		{"", "<think>\nStep 1.\n</think>\n\nAnswer", "Step 1.", "Answer"},
		{"", "  <think>x</think>y", "x", "y"},
		{"", "<think>unclosed", "", "<think>unclosed"},
		{"", "A <think>b</think> c", "", "A <think>b</think> c"},
		{"r", "<think>x</think>y", "r", "<think>x</think>y"},
	} {
		th, rest := splitThought(tc.reasoning, tc.content)
		if th != tc.thought || rest != tc.rest {
			t.Errorf("splitThought(%q, %q) = %q, %q", tc.reasoning, tc.content, th, rest)
		}
		// Streamed in pieces of every size, what is shown is the content.
		for size := 1; size <= len(tc.content)+1; size++ {
			var ts thinkSplitter
			if tc.reasoning != "" {
				ts.pass() // reasoning came apart: the content is all content
			}
			var shown strings.Builder
			for i := 0; i < len(tc.content); i += size {
				shown.WriteString(ts.feed(tc.content[i:min(i+size, len(tc.content))]))
			}
			shown.WriteString(ts.flush())
			want := tc.content
			if tc.reasoning == "" {
				want = tc.rest
			}
			if shown.String() != want {
				t.Errorf("streamed %q in pieces of %d: shown %q, want %q", tc.content, size, shown.String(), want)
			}
		}
	}
}

// TestOpenAIReasoningIsTheThought: reasoning_content (plain and streamed)
// and a leading <think> block become the response's thought; the stream's
// deltas carry only the content.
func TestOpenAIReasoningIsTheThought(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.srv.Reply(openaitest.Reply{Content: "42", Reasoning: "6 times 7."}, openaitest.Reply{Content: "42", Reasoning: "6 times 7."},
		openaitest.Text("<think>6 times 7.</think>\n42"), openaitest.Text("<think>6 times 7.</think>\n42"))
	for i, stream := range []bool{false, true, false, true} {
		req := openaiRequest()
		var deltas strings.Builder
		if stream {
			req.OnDelta = func(d string) { deltas.WriteString(d) }
		}
		resp, err := f.c.Complete(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Content != "42" || resp.Thought != "6 times 7." {
			t.Errorf("reply %d: content %q, thought %q", i, resp.Content, resp.Thought)
		}
		if stream && deltas.String() != "42" {
			t.Errorf("reply %d: deltas %q, want the content only", i, deltas.String())
		}
	}
}

// TestAzureRequestsAreWhatAzureAccepts: an azure endpoint calls its
// deployment URL with the api-version and the key in api-key, never as a
// bearer token; the Azure fake refuses anything else.
func TestAzureRequestsAreWhatAzureAccepts(t *testing.T) {
	t.Parallel()
	srv := openaitest.New(openaitest.WithAPIKey("az-key"), openaitest.Azure("gpt4o-prod", "2024-10-21"))
	defer srv.Close()
	srv.Reply(openaitest.Text("from azure"), openaitest.Text("streamed from azure"))
	c, err := New(Config{Endpoints: []Endpoint{{Name: "az", Kind: KindAzure, BaseURL: srv.URL(), APIVersion: "2024-10-21",
		APIKey: "az-key", Deployment: "gpt4o-prod", Headers: map[string]string{"X-Gateway": "edge-1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := openaiRequest()
	req.Config.Provider = KindAzure
	req.Config.Model = "gpt-4o"
	resp, err := c.Complete(t.Context(), req)
	if err != nil || resp.Content != "from azure" {
		t.Fatalf("resp %+v, err %v", resp, err)
	}
	req.OnDelta = func(string) {}
	if resp, err := c.Complete(t.Context(), req); err != nil || resp.Content != "streamed from azure" {
		t.Fatalf("streamed: resp %+v, err %v", resp, err)
	}
	for _, r := range srv.Requests() {
		if r.Status != 200 || r.Path != "/openai/deployments/gpt4o-prod/chat/completions" || r.Query != "api-version=2024-10-21" ||
			r.Header.Get("Api-Key") != "az-key" || r.Header.Get("Authorization") != "" || r.Header.Get("X-Gateway") != "edge-1" {
			t.Errorf("request %s %s?%s headers %v: %d %s", r.Method, r.Path, r.Query, r.Header, r.Status, r.Error)
		}
	}

	// The fake refuses what Azure refuses: another deployment, a bearer key.
	bad, err := New(Config{Endpoints: []Endpoint{{Name: "az", Kind: KindAzure, BaseURL: srv.URL(), APIVersion: "2024-10-21", APIKey: "az-key"}},
		OpenAI: OpenAIConfig{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	if _, err := bad.Complete(t.Context(), req); err == nil || !strings.Contains(err.Error(), "status 404") {
		t.Errorf("a deployment the resource has not: err = %v", err)
	}
}

// TestLimiterConcurrencyAndFIFO: no more calls in flight than
// max_concurrency, and waiters start in the order they came.
func TestLimiterConcurrencyAndFIFO(t *testing.T) {
	t.Parallel()
	for _, maxConc := range []int{1, 2} {
		m, _ := newMetrics(nil)
		now := time.Unix(1000, 0)
		l := newLimiter(&Endpoint{MaxConcurrency: maxConc}, m.limiterMetrics("x"), func() time.Time { return now })
		var held []*permit
		for range maxConc {
			p, _ := l.acquire(t.Context(), 1)
			held = append(held, p)
		}
		type grant struct {
			i int
			p *permit
		}
		got := make(chan grant, 5)
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Go(func() {
				p, err := l.acquire(t.Context(), 1)
				if err != nil {
					t.Error(err)
					return
				}
				got <- grant{i, p}
			})
			// Wait until the waiter is queued, so the queue order is i's order.
			for deadline := time.Now().Add(10 * time.Second); ; {
				l.mu.Lock()
				n := len(l.queue)
				l.mu.Unlock()
				if n == i+1 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("max_concurrency %d: waiter %d is not queued (%d are) though %d calls are in flight", maxConc, i, n, maxConc)
				}
				time.Sleep(time.Millisecond)
			}
		}
		// A waiter that gives up leaves the queue without taking a slot.
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := l.acquire(ctx, 1); err == nil {
			t.Error("acquire with a cancelled context succeeded while the endpoint was full")
		}
		for _, p := range held {
			p.release(1)
		}
		var order []int
		for range 5 {
			g := <-got
			order = append(order, g.i)
			l.mu.Lock()
			if l.inFlight > maxConc {
				t.Errorf("max_concurrency %d: %d calls in flight", maxConc, l.inFlight)
			}
			l.mu.Unlock()
			if maxConc == 1 {
				g.p.release(1)
				continue
			}
			defer g.p.release(1)
			if len(order) >= 1 {
				// Keep two in flight: release the one granted before.
				g.p.release(1)
			}
		}
		wg.Wait()
		if maxConc == 1 {
			for i, v := range order {
				if v != i {
					t.Fatalf("order = %v, want first come first served", order)
				}
			}
		}
		l.mu.Lock()
		if len(l.queue) != 0 {
			t.Errorf("after all: %d queued", len(l.queue))
		}
		l.mu.Unlock()
	}
}

// TestLimiterRPMSpacesCalls: with rpm 600 the fake sees the k-th call no
// earlier than (k-1) × 100 ms after the calls began.
func TestLimiterRPMSpacesCalls(t *testing.T) {
	t.Parallel()
	srv := openaitest.New()
	defer srv.Close()
	srv.Respond(func(openaitest.Request) openaitest.Reply { return openaitest.Text("ok") })
	c, err := New(Config{Endpoints: []Endpoint{{Name: "slow", Kind: KindOpenAI, BaseURL: srv.URL(), RPM: 600}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := c.Complete(t.Context(), openaiRequest()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	reqs := srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests", len(reqs))
	}
	for k, r := range reqs {
		if min := time.Duration(k) * 100 * time.Millisecond; r.Received.Sub(start) < min {
			t.Errorf("call %d arrived %v after the start, before the rpm spacing allows (%v)", k+1, r.Received.Sub(start), min)
		}
	}
}

// TestLimiterTPM: a call that would take the minute's tokens over tpm waits
// until the earlier calls' tokens leave the window; a call larger than the
// whole budget still runs alone.
func TestLimiterTPM(t *testing.T) {
	t.Parallel()
	m, _ := newMetrics(nil)
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	l := newLimiter(&Endpoint{TPM: 100}, m.limiterMetrics("x"), clock)
	p, err := l.acquire(t.Context(), 500) // larger than the budget, alone: runs
	if err != nil {
		t.Fatal(err)
	}
	p.release(80)                                        // it used 80
	if p, err = l.acquire(t.Context(), 20); err != nil { // 80 + 20 fits
		t.Fatal(err)
	}
	p.release(20)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := l.acquire(ctx, 1); err == nil {
		t.Fatal("a call over the minute's budget started at once")
	}
	mu.Lock()
	now = now.Add(time.Minute + time.Second)
	mu.Unlock()
	l.wake()
	if p, err = l.acquire(t.Context(), 90); err != nil {
		t.Fatal(err)
	}
	p.release(90)
}

// BenchmarkLimiter prints the cost a model call pays for its endpoint's
// limits: one acquire and release, alone and with 8 callers contending for
// 4 slots (beside an HTTP request, which costs milliseconds).
func BenchmarkLimiter(b *testing.B) {
	m, _ := newMetrics(nil)
	b.Run("uncontended", func(b *testing.B) {
		l := newLimiter(&Endpoint{MaxConcurrency: 4, TPM: 1 << 30}, m.limiterMetrics("b"), time.Now)
		for b.Loop() {
			p, _ := l.acquire(context.Background(), 100)
			p.release(100)
		}
	})
	b.Run("contended", func(b *testing.B) {
		l := newLimiter(&Endpoint{MaxConcurrency: 4}, m.limiterMetrics("b"), time.Now)
		b.SetParallelism(8)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				p, _ := l.acquire(context.Background(), 100)
				p.release(100)
			}
		})
	})
}

// TestTokenEstimateOnlyForATPMBudget: a call is estimated (a token per four
// characters of its prompt) when its endpoint has a tpm budget, and not
// at all without one, where nothing would read it.
func TestTokenEstimateOnlyForATPMBudget(t *testing.T) {
	t.Parallel()
	req := openaiRequest()
	req.Messages[0].Content = strings.Repeat("é", 400-len("Say hi.")) // 400 characters in all
	m, _ := newMetrics(nil)
	for _, tc := range []struct {
		tpm  int
		want int64
	}{{0, 0}, {1000, 100}} {
		ep, err := newEndpoint(Endpoint{Name: "e", Kind: KindOpenAI, APIKey: "k", TPM: tc.tpm}, OpenAIConfig{}, nil, m, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		if got := ep.tokenEstimate(req); got != tc.want {
			t.Errorf("tpm %d: estimate = %d, want %d", tc.tpm, got, tc.want)
		}
	}
}
