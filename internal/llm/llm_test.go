package llm

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	err := Config{OpenAI: OpenAIConfig{
		BaseURL:     "ftp://example.com",
		Timeout:     -1,
		MaxRetries:  -2,
		BackoffBase: -1,
		BackoffMax:  -1,
	}}.Validate()
	if err == nil {
		t.Fatal("Validate() = nil, want errors")
	}
	for _, want := range []string{"scheme", "timeout", "max retries", "backoff base", "backoff max"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %q, want it to mention %q", err, want)
		}
	}
	if err := (Config{OpenAI: OpenAIConfig{BackoffBase: time.Minute, BackoffMax: time.Second}}).Validate(); err == nil ||
		!strings.Contains(err.Error(), "above backoff max") {
		t.Errorf("base above max: Validate() = %v", err)
	}
	if err := (Config{OpenAI: OpenAIConfig{BackoffBase: time.Minute}}).Validate(); err == nil {
		t.Errorf("base above default max: Validate() = nil, want an error")
	}
	if err := (Config{OpenAI: OpenAIConfig{BaseURL: "http://127.0.0.1:1/v1", MaxRetries: -1}}).Validate(); err != nil {
		t.Errorf("valid config: Validate() = %v", err)
	}
	if _, err := New(Config{OpenAI: OpenAIConfig{Timeout: -1}}); err == nil {
		t.Error("New with an invalid config succeeded")
	}
}

func TestProviders(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  OpenAIConfig
		want []string
	}{
		{"nothing configured", OpenAIConfig{}, []string{"replay"}},
		{"api key", OpenAIConfig{APIKey: "sk-test"}, []string{"replay", "openai"}},
		{"base url", OpenAIConfig{BaseURL: "http://127.0.0.1:1/v1"}, []string{"replay", "openai"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := New(Config{OpenAI: tc.cfg})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			if got := c.Providers(); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("Providers() = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCompleteRejectsUnknownAndUnconfiguredProviders(t *testing.T) {
	t.Parallel()
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	msgs := []chat.ModelMessage{{Role: "user", Content: "hi"}}
	if _, err := c.Complete(ctx, &chat.ModelRequest{Config: spec.Model{Provider: "bedrock"}, Messages: msgs}); err == nil ||
		!strings.Contains(err.Error(), `unknown model provider "bedrock"`) {
		t.Errorf("unknown provider: err = %v", err)
	}
	if _, err := c.Complete(ctx, &chat.ModelRequest{Config: spec.Model{Provider: "openai", Model: "m"}, Messages: msgs}); err == nil ||
		!strings.Contains(err.Error(), "not configured") {
		t.Errorf("unconfigured openai: err = %v", err)
	}
	if _, err := c.Complete(ctx, nil); err == nil {
		t.Error("nil request: err = nil")
	}
}

func TestMetricsShareARegistry(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	for range 2 {
		c, err := New(Config{OpenAI: OpenAIConfig{APIKey: "k"}, Registerer: reg})
		if err != nil {
			t.Fatalf("second client on one registry: %v", err)
		}
		_ = c.Close()
	}
}

// logSink collects JSON log lines and signals each Warn record.
type logSink struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	warns chan struct{}
}

func newLogSink() *logSink { return &logSink{warns: make(chan struct{}, 100)} }

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if bytes.Contains(p, []byte(`"level":"WARN"`)) {
		select {
		case s.warns <- struct{}{}:
		default:
		}
	}
	return s.buf.Write(p)
}

func (s *logSink) logger() *slog.Logger { return slog.New(slog.NewJSONHandler(s, nil)) }

// records returns the decoded log records with the given message.
func (s *logSink) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for line := range bytes.Lines(s.buf.Bytes()) {
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// counter reads agentd_model_retries_total{provider,reason} from reg.
func counter(t *testing.T, reg *prometheus.Registry, provider, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "agentd_model_retries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["provider"] == provider && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// within fails the test when f does not return within d: for calls that must
// return promptly, without leaving the test hanging when they don't.
func within(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("call did not return within %v", d)
	}
}
