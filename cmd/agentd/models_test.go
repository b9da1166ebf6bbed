package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/llm"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestModelsFile: endpoints with keys from a variable and from a file, in
// YAML and in JSON.
func TestModelsFile(t *testing.T) {
	keyFile := writeFile(t, "claude.key", "  sk-ant-from-file\n")
	yaml := writeFile(t, "models.yaml", `default: gpt
endpoints:
  - name: gpt
    kind: openai
    api_key_env: MY_OPENAI_KEY
    models: ["gpt-*"]
    max_concurrency: 8
    rpm: 500
    tpm: 200000
    timeout_s: 90
  - name: azure
    kind: azure
    base_url: https://contoso.openai.azure.com
    deployment: gpt4o-prod
    api_version: "2024-10-21"
    api_key_env: AZ_KEY
    headers: {X-Team: agents}
  - name: claude
    kind: anthropic
    api_key_file: `+keyFile+`
`)
	c := parse(t, envMap("AGENTD_MODELS_FILE", yaml, "MY_OPENAI_KEY", "sk-openai", "AZ_KEY", "az-key", "OPENAI_API_KEY", "sk-ignored"))
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg, err := c.models()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Default != "gpt" || len(cfg.Endpoints) != 3 {
		t.Fatalf("config = %+v", cfg)
	}
	gpt, az, cl := cfg.Endpoints[0], cfg.Endpoints[1], cfg.Endpoints[2]
	if gpt.APIKey != "sk-openai" || gpt.MaxConcurrency != 8 || gpt.RPM != 500 || gpt.TPM != 200000 || gpt.Timeout != 90*time.Second || gpt.Models[0] != "gpt-*" {
		t.Errorf("gpt = %+v", gpt)
	}
	if az.APIKey != "az-key" || az.Deployment != "gpt4o-prod" || az.APIVersion != "2024-10-21" || az.Headers["X-Team"] != "agents" {
		t.Errorf("azure = %+v", az)
	}
	if cl.APIKey != "sk-ant-from-file" || cl.Kind != "anthropic" {
		t.Errorf("claude = %+v", cl)
	}

	json := writeFile(t, "models.json", `{"endpoints": [{"name": "local", "kind": "openai", "base_url": "http://127.0.0.1:8000/v1", "h2c": true}]}`)
	c = parse(t, envMap("AGENTD_MODELS_FILE", json))
	if cfg, err := c.models(); err != nil || len(cfg.Endpoints) != 1 || cfg.Endpoints[0].APIKey != "" || !cfg.Endpoints[0].H2C || gpt.H2C {
		t.Errorf("json: %+v, %v", cfg, err)
	}

	// Without a file, the single-endpoint variables are the endpoint "openai".
	c = parse(t, envMap("OPENAI_API_KEY", "sk-x", "OPENAI_BASE_URL", "http://127.0.0.1:1/v1"))
	if cfg, err := c.models(); err != nil || cfg.OpenAI.APIKey != "sk-x" || len(cfg.Endpoints) != 0 {
		t.Errorf("single endpoint: %+v, %v", cfg, err)
	}

	// ANTHROPIC_API_KEY alone is the endpoint "anthropic", as
	// OPENAI_API_KEY alone is "openai"; with a file it is not read.
	c = parse(t, envMap("ANTHROPIC_API_KEY", "sk-ant-x"))
	single, err := c.models()
	if err != nil {
		t.Fatal(err)
	}
	client, err := llm.New(*single)
	if err != nil {
		t.Fatal(err)
	}
	if p, eps := client.Providers(), client.Endpoints(); !slices.Equal(p, []string{"replay", "anthropic"}) || !slices.Equal(eps, []string{"anthropic"}) {
		t.Errorf("ANTHROPIC_API_KEY alone: providers %v, endpoints %v", p, eps)
	}
	c = parse(t, envMap("AGENTD_MODELS_FILE", json, "ANTHROPIC_API_KEY", "sk-ant-x"))
	if cfg, err := c.models(); err != nil || len(cfg.Endpoints) != 1 || cfg.Anthropic.APIKey != "" {
		t.Errorf("ANTHROPIC_API_KEY with a file: %+v, %v", cfg, err)
	}
}

// TestModelsFileProblems: every problem is reported at once, and no error
// repeats a key.
func TestModelsFileProblems(t *testing.T) {
	file := writeFile(t, "models.yaml", `default: nowhere
endpoints:
  - name: a
    kind: openai
    api_key_env: SET_KEY
    api_key_file: /nonexistent
  - name: b
    kind: azure
    api_key_env: UNSET_KEY
  - name: c
    kind: anthropic
    api_key_file: /nonexistent/key
    timeout_s: -1
  - name: d
    kind: openai
    api_key_env: SET_KEY
    headers: {Authorization: "Bearer sk-secret-in-header"}
`)
	c := parse(t, envMap("AGENTD_MODELS_FILE", file, "SET_KEY", "sk-very-secret-value", "OPENAI_BASE_URL", "http://x"))
	err := c.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{"OPENAI_BASE_URL is not used with AGENTD_MODELS_FILE"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not say %q:\n%s", want, msg)
		}
	}
	c = parse(t, envMap("AGENTD_MODELS_FILE", file, "SET_KEY", "sk-very-secret-value"))
	msg = c.Validate().Error()
	for _, want := range []string{"give api_key_env or api_key_file, not both", "api_key_env UNSET_KEY is not set", "api_key_file: open /nonexistent/key",
		"timeout_s must be between 0 and 3600", `base_url is required for kind azure`, `header "Authorization" is set by agentd itself`, `default endpoint "nowhere"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not say %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "sk-very-secret-value") || strings.Contains(msg, "sk-secret-in-header") {
		t.Errorf("an error repeats a key:\n%s", msg)
	}
	unknown := writeFile(t, "models.yaml", "endpoints:\n  - name: a\n    kind: openai\n    api_key: sk-inline\n")
	c = parse(t, envMap("AGENTD_MODELS_FILE", unknown))
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "field api_key not found") {
		t.Errorf("a key written into the file: %v", err)
	}
}

// TestDeployedModelsFilesLoad: the models files of deploy/ and docs/models.md's
// example are valid; only their key files, which exist where they are
// mounted, and their key variables are missing here (and so are the keys).
func TestDeployedModelsFilesLoad(t *testing.T) {
	compose, err := os.ReadFile("../../deploy/compose/models.yaml")
	if err != nil {
		t.Fatal(err)
	}
	k8s, err := os.ReadFile("../../deploy/kubernetes/agentd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The ConfigMap's models.yaml, unindented.
	_, block, _ := strings.Cut(string(k8s), "  models.yaml: |\n")
	block, _, _ = strings.Cut(block, "\n---")
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		lines = append(lines, strings.TrimPrefix(l, "    "))
	}
	guide, err := os.ReadFile("../../docs/models.md")
	if err != nil {
		t.Fatal(err)
	}
	_, example, _ := strings.Cut(string(guide), "```yaml\n")
	example, _, _ = strings.Cut(example, "```")
	for name, content := range map[string]string{"compose": string(compose), "kubernetes": strings.Join(lines, "\n"), "docs/models.md": example} {
		_, err := loadModels(writeFile(t, "models.yaml", content), func(string) string { return "" })
		if err == nil {
			t.Fatalf("%s: the key files exist on this machine?", name)
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			if !strings.Contains(line, "api_key_file: open /") && !strings.Contains(line, "a key is required for kind") && !strings.Contains(line, "is not set") {
				t.Errorf("%s: %s", name, line)
			}
		}
	}
}
