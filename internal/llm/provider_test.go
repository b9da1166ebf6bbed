package llm

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/llm/anthropictest"
	"github.com/agentd/agentd/internal/spec"
)

// checkSpec validates body as a server with client c does at create time.
func checkSpec(t *testing.T, c *Client, body []byte) []spec.Problem {
	t.Helper()
	_, _, probs := spec.Check(body, spec.Limits{}, spec.Env{Providers: c.Providers()[1:], Models: c})
	return probs
}

// TestAProviderNotConfiguredSaysWhatToSet: a spec naming a provider this
// server has no endpoint of is told what the operator sets to offer it,
// not only which providers there are.
func TestAProviderNotConfiguredSaysWhatToSet(t *testing.T) {
	t.Parallel()
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../../examples/openai-review.json")
	if err != nil {
		t.Fatal(err)
	}
	anthropic := []byte(`{"task": "x", "agents": [{"name": "a", "type": "assistant", "model": "m"}],
		"models": {"m": {"provider": "anthropic", "model": "claude-sonnet-4-5"}}}`)
	for _, tc := range []struct {
		name string
		body []byte
		want []string
	}{
		{"openai-review example", example, []string{`provider "openai" is not configured`, "OPENAI_API_KEY", "AGENTD_MODELS_FILE", `["replay"]`}},
		{"anthropic", anthropic, []string{`provider "anthropic" is not configured`, "ANTHROPIC_API_KEY", "AGENTD_MODELS_FILE"}},
		{"no such kind", []byte(strings.Replace(string(anthropic), `"anthropic"`, `"gemini"`, 1)), []string{`unknown provider "gemini"; this server offers ["replay"]`}},
	} {
		probs := checkSpec(t, c, tc.body)
		var provider []spec.Problem
		for _, p := range probs {
			if strings.HasSuffix(p.Path, "/provider") {
				provider = append(provider, p)
			}
		}
		if len(provider) == 0 {
			t.Errorf("%s: no provider problem in %v", tc.name, probs)
			continue
		}
		for _, p := range provider {
			for _, w := range tc.want {
				if !strings.Contains(p.Message, w) {
					t.Errorf("%s: %s: %q does not say %q", tc.name, p.Path, p.Message, w)
				}
			}
		}
	}

	// With a models file, the variables are not read: the file is what to
	// change.
	file, err := New(Config{Endpoints: []Endpoint{{Name: "local", Kind: KindOpenAI, BaseURL: "http://127.0.0.1:1/v1"}}})
	if err != nil {
		t.Fatal(err)
	}
	probs := checkSpec(t, file, anthropic)
	if len(probs) != 1 || !strings.Contains(probs[0].Message, "add an endpoint of kind anthropic to AGENTD_MODELS_FILE (its api_key_env may be ANTHROPIC_API_KEY)") {
		t.Errorf("with a models file: %v", probs)
	}
}

// TestAnthropicKeyAloneIsTheEndpointAnthropic: ANTHROPIC_API_KEY alone
// (Config.Anthropic) gives the endpoint "anthropic", which serves any
// model of provider anthropic, as OPENAI_API_KEY alone gives "openai".
func TestAnthropicKeyAloneIsTheEndpointAnthropic(t *testing.T) {
	t.Parallel()
	srv := anthropictest.New(anthropictest.WithAPIKey(anthropicKey))
	t.Cleanup(srv.Close)
	c, err := New(Config{Anthropic: AnthropicConfig{APIKey: anthropicKey, BaseURL: srv.URL()},
		OpenAI: OpenAIConfig{BackoffBase: time.Millisecond, BackoffMax: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if p, eps := c.Providers(), c.Endpoints(); len(p) != 2 || p[1] != KindAnthropic || len(eps) != 1 || eps[0] != SingleAnthropicEndpoint {
		t.Fatalf("providers %v, endpoints %v", p, eps)
	}
	body := []byte(`{"task": "x", "agents": [{"name": "a", "type": "assistant", "model": "m"}],
		"models": {"m": {"provider": "anthropic", "model": "claude-sonnet-4-5"}}}`)
	if probs := checkSpec(t, c, body); len(probs) > 0 {
		t.Fatalf("a spec of provider anthropic: %v", probs)
	}
	srv.Reply(anthropictest.Reply{Text: "Hello!"})
	resp, err := c.Complete(t.Context(), anthropicReq(chat.ModelMessage{Role: chat.RoleUser, Name: "user", Content: "Greet us."}))
	if err != nil || resp.Content != "Hello!" {
		t.Fatalf("Complete = %+v, %v", resp, err)
	}
	if r := srv.Requests(); len(r) != 1 || r[0].Status != 200 {
		t.Errorf("requests: %+v", r)
	}

	// The default base URL is Anthropic's.
	d, err := New(Config{Anthropic: AnthropicConfig{APIKey: anthropicKey}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if info, ok := d.EndpointInfo(SingleAnthropicEndpoint); !ok || info.Kind != KindAnthropic || normalizeURL(info.BaseURL) != normalizeURL(defaultAnthropicBaseURL) {
		t.Errorf("endpoint anthropic = %+v, %v", info, ok)
	}
}
