package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/agentd/agentd/internal/component"
	"github.com/agentd/agentd/internal/llm"
)

// modelsFile is AGENTD_MODELS_FILE (YAML, or JSON, which is YAML too): the
// named model endpoints (docs/models.md). Keys are never in it: each endpoint
// names the environment variable or the file that holds its key, so the
// file itself can live in a ConfigMap or a repository.
type modelsFile struct {
	// Default names the endpoint of a model that no endpoint's globs
	// match (of its kind).
	Default   string            `yaml:"default"`
	Endpoints []modelsFileEntry `yaml:"endpoints"`
}

// modelsFileEntry is one endpoint as the file writes it.
type modelsFileEntry struct {
	Name           string            `yaml:"name"`
	Kind           string            `yaml:"kind"`
	BaseURL        string            `yaml:"base_url"`
	APIKeyEnv      string            `yaml:"api_key_env"`
	APIKeyFile     string            `yaml:"api_key_file"`
	Organization   string            `yaml:"organization"`
	APIVersion     string            `yaml:"api_version"`
	Deployment     string            `yaml:"deployment"`
	Headers        map[string]string `yaml:"headers"`
	Models         []string          `yaml:"models"`
	MaxConcurrency int               `yaml:"max_concurrency"`
	RPM            int               `yaml:"rpm"`
	TPM            int               `yaml:"tpm"`
	TimeoutS       float64           `yaml:"timeout_s"`
	H2C            bool              `yaml:"h2c"`
}

// maxModelsFile bounds the file: it is configuration, not data.
const maxModelsFile = 1 << 20

// loadModels reads the models file and resolves each endpoint's key from
// its variable or file. Every problem is reported, joined; no error
// message holds a key.
func loadModels(path string, getenv func(string) string) (*llm.Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("AGENTD_MODELS_FILE: %w", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxModelsFile+1))
	if err != nil {
		return nil, fmt.Errorf("AGENTD_MODELS_FILE %s: %w", path, err)
	}
	if len(raw) > maxModelsFile {
		return nil, fmt.Errorf("AGENTD_MODELS_FILE %s: larger than %d bytes", path, maxModelsFile)
	}
	var mf modelsFile
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&mf); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("AGENTD_MODELS_FILE %s: empty", path)
		}
		return nil, fmt.Errorf("AGENTD_MODELS_FILE %s: %w", path, err)
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("AGENTD_MODELS_FILE %s: "+format, append([]any{path}, args...)...))
	}
	if len(mf.Endpoints) == 0 {
		bad("lists no endpoints")
	}
	cfg := &llm.Config{Default: mf.Default}
	for i, e := range mf.Endpoints {
		ep := llm.Endpoint{Name: e.Name, Kind: e.Kind, BaseURL: e.BaseURL, Organization: e.Organization,
			APIVersion: e.APIVersion, Deployment: e.Deployment, Headers: e.Headers, Models: e.Models,
			MaxConcurrency: e.MaxConcurrency, RPM: e.RPM, TPM: e.TPM, H2C: e.H2C}
		who := fmt.Sprintf("endpoint %d (%q)", i+1, e.Name)
		if e.TimeoutS < 0 || e.TimeoutS > 3600 {
			bad("%s: timeout_s must be between 0 and 3600", who)
		}
		ep.Timeout = time.Duration(e.TimeoutS * float64(time.Second))
		switch {
		case e.APIKeyEnv != "" && e.APIKeyFile != "":
			bad("%s: give api_key_env or api_key_file, not both", who)
		case e.APIKeyEnv != "":
			ep.APIKey = strings.TrimSpace(getenv(e.APIKeyEnv))
			if ep.APIKey == "" {
				bad("%s: api_key_env %s is not set", who, e.APIKeyEnv)
			}
		case e.APIKeyFile != "":
			b, err := os.ReadFile(e.APIKeyFile)
			switch {
			case err != nil:
				bad("%s: api_key_file: %v", who, err)
			case strings.TrimSpace(string(b)) == "":
				bad("%s: api_key_file %s is empty", who, e.APIKeyFile)
			default:
				ep.APIKey = strings.TrimSpace(string(b))
			}
		}
		cfg.Endpoints = append(cfg.Endpoints, ep)
	}
	if err := cfg.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("AGENTD_MODELS_FILE %s: %w", path, err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}

// teamEndpoints lets the translation of AgentChat team files see the model
// endpoints (component.Endpoints), in component's terms.
type teamEndpoints struct{ c *llm.Client }

func (t teamEndpoints) Match(m component.ModelClient) (string, error) {
	return t.c.MatchEndpoint(llm.ClientRef{Kind: m.Kind, Model: m.Model, BaseURL: m.BaseURL, Deployment: m.Deployment})
}

func (t teamEndpoints) Describe(name string) (component.EndpointInfo, bool) {
	info, ok := t.c.EndpointInfo(name)
	return component.EndpointInfo{Kind: info.Kind, BaseURL: info.BaseURL, APIVersion: info.APIVersion, Deployment: info.Deployment}, ok
}
