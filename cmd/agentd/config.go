package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/egress"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/tool"
	"github.com/agentd/agentd/internal/webhook"
)

// Config is everything agentd reads from its flags and environment. Flags
// mirror the environment variables (docs/configuration.md): a flag given on the command
// line wins over the variable, which wins over the default.
type Config struct {
	Addr             string
	DatabaseURL      string
	DataDir          string
	Sandbox          string
	SandboxImage     string
	OpenAIAPIKey     string
	OpenAIBaseURL    string
	AnthropicAPIKey  string
	ModelsFile       string
	APIKeys          string
	APIKeysFile      string
	MaxActiveChats   int
	MaxRoundLimit    int
	ShutdownGrace    time.Duration
	LeaseTTL         time.Duration
	AppendTimeout    time.Duration
	MaxBodyBytes     int64
	MaxImageBytes    int
	GCHeapFloor      int64
	LogLevel         string
	LogFormat        string
	Migrate          bool
	ModelCallTimeout time.Duration
	ToolAllowHosts   string
	// ToolSecrets is AGENTD_TOOL_SECRETS: a JSON object of secret names to
	// values that tool headers name ({"secret": "NAME"}).
	ToolSecrets      string
	ToolAllowPrivate bool
	DockerHost       string
	SandboxOwner     string
	SandboxWorkRoot  string
	SandboxReap      time.Duration
	// SandboxAllowHosts is what sandbox.network.allow may name; empty: no
	// sandbox gets a network.
	SandboxAllowHosts     string
	SandboxEgressMaxBytes int64
	DatabaseWait          time.Duration
	ShutdownDrain         time.Duration
	AdminAddr             string
	// Webhooks and retention (docs/backend.md).
	WebhooksFile    string
	WebhookSecret   string
	WebhookRetryFor time.Duration
	WebhookTimeout  time.Duration
	Retention       time.Duration
	// Traces is whether OpenTelemetry traces are exported, decided from the
	// standard variables by tracesEnabled; the exporter reads the rest.
	Traces bool
	GuardConfig

	// envErrs are malformed environment values found by RegisterFlags,
	// reported by Validate with everything else.
	envErrs []error
	// getenv is the environment RegisterFlags read: the models file's
	// endpoints name the variables that hold their keys.
	getenv func(string) string
}

// RegisterFlags defines the flags on fs with defaults taken from getenv.
func (c *Config) RegisterFlags(fs *flag.FlagSet, getenv func(string) string) {
	env := &envReader{getenv: getenv}
	c.getenv = getenv
	defer func() { c.envErrs = env.errs }()
	str := func(p *string, name, key, def, usage string) {
		fs.StringVar(p, name, env.str(key, def), usage+" ("+key+")")
	}
	str(&c.Addr, "addr", "AGENTD_ADDR", "127.0.0.1:8080", "listen address")
	c.Traces = env.traces()
	str(&c.AdminAddr, "admin-addr", "AGENTD_ADMIN_ADDR", "", "listen address of the admin listener (pprof, metrics; no authentication); empty: none")
	str(&c.DatabaseURL, "database-url", "AGENTD_DATABASE_URL", "", "postgres:// URL; empty: embedded SQLite in the data dir")
	str(&c.DataDir, "data-dir", "AGENTD_DATA_DIR", "./agentd-data", "directory of the embedded SQLite store")
	str(&c.Sandbox, "sandbox", "AGENTD_SANDBOX", "auto", "code sandbox: auto, docker, bwrap or none")
	str(&c.SandboxImage, "sandbox-image", "AGENTD_SANDBOX_IMAGE", "agentd-sandbox:latest", "image of the docker sandbox")
	str(&c.DockerHost, "docker-host", "DOCKER_HOST", "", "Docker Engine API of the docker sandbox (default: Podman's socket if present, else /var/run/docker.sock)")
	str(&c.SandboxOwner, "sandbox-owner", "AGENTD_SANDBOX_OWNER", "agentd", "label of this deployment's sandboxes: the same for every replica of one deployment")
	str(&c.SandboxWorkRoot, "sandbox-work-root", "AGENTD_SANDBOX_WORK_ROOT", "", "host dir of the bwrap sandboxes' work dirs (default: sandboxes in the data dir, which the sandbox user can reach)")
	fs.DurationVar(&c.SandboxReap, "sandbox-reap-interval", env.duration("AGENTD_SANDBOX_REAP_INTERVAL", 5*time.Minute), "how often sandboxes of ended chats are removed (AGENTD_SANDBOX_REAP_INTERVAL)")
	str(&c.OpenAIAPIKey, "openai-api-key", "OPENAI_API_KEY", "", "API key of the openai provider")
	str(&c.OpenAIBaseURL, "openai-base-url", "OPENAI_BASE_URL", "", "base URL of the openai provider (any OpenAI-compatible server)")
	str(&c.AnthropicAPIKey, "anthropic-api-key", "ANTHROPIC_API_KEY", "", "API key of the anthropic provider (the endpoint \"anthropic\")")
	str(&c.ModelsFile, "models-file", "AGENTD_MODELS_FILE", "", "YAML or JSON file of named model endpoints (kinds openai, azure, anthropic) with their limits; replaces OPENAI_BASE_URL")
	str(&c.APIKeys, "api-keys", "AGENTD_API_KEYS", "", "comma-separated bearer keys, each key:tenant")
	str(&c.APIKeysFile, "api-keys-file", "AGENTD_API_KEYS_FILE", "", "file with one key:tenant per line")
	str(&c.LogLevel, "log-level", "AGENTD_LOG_LEVEL", "info", "debug, info, warn or error")
	str(&c.LogFormat, "log-format", "AGENTD_LOG_FORMAT", "text", "text or json")
	fs.IntVar(&c.MaxActiveChats, "max-active-chats", env.int("AGENTD_MAX_ACTIVE_CHATS", 1000), "chats this replica runs at once (AGENTD_MAX_ACTIVE_CHATS)")
	fs.IntVar(&c.MaxRoundLimit, "max-round-limit", env.int("AGENTD_MAX_ROUND_LIMIT", 100), "largest max_round a spec may ask for (AGENTD_MAX_ROUND_LIMIT)")
	fs.DurationVar(&c.ShutdownGrace, "shutdown-grace", env.duration("AGENTD_SHUTDOWN_GRACE", 30*time.Second), "time to drain on SIGTERM (AGENTD_SHUTDOWN_GRACE)")
	fs.DurationVar(&c.LeaseTTL, "lease-ttl", env.duration("AGENTD_LEASE_TTL", 15*time.Second), "chat lease duration; a crashed replica's chats continue after it (AGENTD_LEASE_TTL)")
	fs.DurationVar(&c.AppendTimeout, "append-timeout", env.duration("AGENTD_APPEND_TIMEOUT", 30*time.Second), "timeout of one log append; a chat whose append timed out is continued from its log (AGENTD_APPEND_TIMEOUT)")
	fs.DurationVar(&c.ModelCallTimeout, "model-call-timeout", env.duration("AGENTD_MODEL_CALL_TIMEOUT", 120*time.Second), "timeout of one model call attempt (AGENTD_MODEL_CALL_TIMEOUT)")
	fs.IntVar(&c.MaxImageBytes, "max-image-bytes", env.int("AGENTD_MAX_IMAGE_BYTES", spec.DefaultMaxImageBytes), "largest image of a MultiModalMessage, in bytes; a request body holds it in base64, so AGENTD_MAX_BODY_BYTES bounds it too (AGENTD_MAX_IMAGE_BYTES)")
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", int64(env.int("AGENTD_MAX_BODY_BYTES", 1<<20)), "largest request body (AGENTD_MAX_BODY_BYTES)")
	str(&c.SandboxAllowHosts, "sandbox-allow-hosts", "AGENTD_SANDBOX_ALLOW_HOSTS", "", "comma-separated hosts (ports 80 and 443), host:port, *.domain[:port], IPs or CIDRs that a spec's sandbox.network.allow may name; sandboxes reach them through agentd's egress proxy (empty: sandboxes have no network)")
	fs.Int64Var(&c.SandboxEgressMaxBytes, "sandbox-egress-max-bytes", int64(env.int("AGENTD_SANDBOX_EGRESS_MAX_BYTES", 1<<30)), "bytes one chat's sandbox may exchange with the hosts it may reach, both directions (AGENTD_SANDBOX_EGRESS_MAX_BYTES)")
	str(&c.ToolAllowHosts, "tool-allow-hosts", "AGENTD_TOOL_ALLOW_HOSTS", "", "comma-separated hosts, host:port, IPs or CIDRs that http and mcp tools may reach (empty: any public host)")
	fs.Int64Var(&c.GCHeapFloor, "gc-heap-floor-bytes", int64(env.int("AGENTD_GC_HEAP_FLOOR_BYTES", 32<<20)), "heap growth always allowed before a garbage collection, so a small heap is not collected over and over; 0: only GOGC (AGENTD_GC_HEAP_FLOOR_BYTES)")
	str(&c.ToolSecrets, "tool-secrets", "AGENTD_TOOL_SECRETS", "", `JSON object of secret names to values, e.g. {"github": "Bearer ghp_…"}: headers of mcp and http tools name a secret ({"secret": "github"}) and never hold its value`)
	fs.BoolVar(&c.ToolAllowPrivate, "tool-allow-private", env.bool("AGENTD_TOOL_ALLOW_PRIVATE", false), "let tools reach loopback and private addresses (AGENTD_TOOL_ALLOW_PRIVATE)")
	fs.DurationVar(&c.DatabaseWait, "database-wait", env.duration("AGENTD_DATABASE_WAIT", 60*time.Second), "how long to retry an unreachable database at start before giving up (AGENTD_DATABASE_WAIT)")
	fs.DurationVar(&c.ShutdownDrain, "shutdown-drain", env.duration("AGENTD_SHUTDOWN_DRAIN", 5*time.Second), "on SIGTERM, time between /readyz turning 503 and stopping, while requests are still served, so load balancers see the 503 first; none when nothing has asked /readyz (AGENTD_SHUTDOWN_DRAIN)")
	fs.BoolVar(&c.Migrate, "migrate", env.bool("AGENTD_MIGRATE", true), "run migrations at start (AGENTD_MIGRATE)")
	str(&c.WebhooksFile, "webhooks-file", "AGENTD_WEBHOOKS_FILE", "", "JSON file of tenant webhook endpoints: [{\"tenant\", \"url\", \"events\"?, \"secret\"?}]")
	str(&c.WebhookSecret, "webhook-secret", "AGENTD_WEBHOOK_SECRET", "", "whsec_ secret that signs webhooks of specs and of endpoints without their own; empty: specs may not name a webhook")
	fs.DurationVar(&c.WebhookRetryFor, "webhook-retry-for", env.duration("AGENTD_WEBHOOK_RETRY_FOR", 24*time.Hour), "how long a failing webhook delivery is retried (AGENTD_WEBHOOK_RETRY_FOR)")
	fs.DurationVar(&c.WebhookTimeout, "webhook-timeout", env.duration("AGENTD_WEBHOOK_TIMEOUT", 10*time.Second), "timeout of one webhook request (AGENTD_WEBHOOK_TIMEOUT)")
	fs.DurationVar(&c.Retention, "retention", env.duration("AGENTD_RETENTION", 0), "erase chats that ended longer ago than this, e.g. 720h; 0: keep them (AGENTD_RETENTION)")
	c.GuardConfig.registerFlags(fs, env)
}

// Validate reports every problem of the configuration at once.
func (c *Config) Validate() error {
	errs := append([]error(nil), c.envErrs...)
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	host, _, addrErr := net.SplitHostPort(c.Addr)
	if addrErr != nil {
		bad("AGENTD_ADDR %q: %v", c.Addr, addrErr)
	}
	if c.AdminAddr != "" {
		if _, _, err := net.SplitHostPort(c.AdminAddr); err != nil {
			bad("AGENTD_ADMIN_ADDR %q: %v", c.AdminAddr, err)
		}
	}
	if c.DatabaseURL != "" && !strings.HasPrefix(c.DatabaseURL, "postgres://") && !strings.HasPrefix(c.DatabaseURL, "postgresql://") {
		bad("AGENTD_DATABASE_URL must be a postgres:// URL (or empty for embedded SQLite)")
	}
	if c.DatabaseURL == "" && c.DataDir == "" {
		bad("AGENTD_DATA_DIR must be set when AGENTD_DATABASE_URL is empty")
	}
	switch c.Sandbox {
	case "auto", "none", "docker", "bwrap":
	default:
		bad("AGENTD_SANDBOX must be auto, docker, bwrap or none, not %q", c.Sandbox)
	}
	if c.SandboxReap < time.Second {
		bad("AGENTD_SANDBOX_REAP_INTERVAL must be at least 1s")
	}
	if _, err := c.models(); err != nil {
		errs = append(errs, err)
	}
	if c.MaxActiveChats < 1 {
		bad("AGENTD_MAX_ACTIVE_CHATS must be at least 1")
	}
	if c.MaxRoundLimit < 1 {
		bad("AGENTD_MAX_ROUND_LIMIT must be at least 1")
	}
	if c.ShutdownGrace <= 0 {
		bad("AGENTD_SHUTDOWN_GRACE must be positive")
	}
	if c.GCHeapFloor < 0 {
		bad("AGENTD_GC_HEAP_FLOOR_BYTES must not be negative")
	}
	if c.DatabaseWait < 0 {
		bad("AGENTD_DATABASE_WAIT must not be negative")
	}
	if c.ShutdownDrain < 0 {
		bad("AGENTD_SHUTDOWN_DRAIN must not be negative")
	}
	if c.LeaseTTL < 300*time.Millisecond {
		bad("AGENTD_LEASE_TTL must be at least 300ms")
	}
	if c.AppendTimeout < 100*time.Millisecond {
		bad("AGENTD_APPEND_TIMEOUT must be at least 100ms")
	}
	if c.ModelCallTimeout <= 0 {
		bad("AGENTD_MODEL_CALL_TIMEOUT must be positive")
	}
	if c.MaxImageBytes < 1 {
		bad("AGENTD_MAX_IMAGE_BYTES must be at least 1")
	}
	if c.MaxBodyBytes < 1024 {
		bad("AGENTD_MAX_BODY_BYTES must be at least 1024")
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		bad("AGENTD_LOG_LEVEL: %v", err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		bad("AGENTD_LOG_FORMAT must be text or json")
	}
	if err := (tool.Config{HTTPAllowHosts: splitList(c.ToolAllowHosts)}).Validate(); err != nil {
		bad("AGENTD_TOOL_ALLOW_HOSTS: %v", err)
	}
	if secrets, err := c.toolSecrets(); err != nil {
		bad("AGENTD_TOOL_SECRETS: %v", err)
	} else if err := (tool.Config{Secrets: secrets}).Validate(); err != nil {
		bad("AGENTD_TOOL_SECRETS: %v", err)
	}
	if err := (egress.Config{AllowHosts: splitList(c.SandboxAllowHosts)}).Validate(); err != nil {
		bad("AGENTD_SANDBOX_ALLOW_HOSTS: %v", err)
	}
	if c.SandboxEgressMaxBytes < 1 {
		bad("AGENTD_SANDBOX_EGRESS_MAX_BYTES must be at least 1")
	}
	if c.WebhookSecret != "" {
		if _, err := webhook.ParseSecret(c.WebhookSecret); err != nil {
			bad("AGENTD_WEBHOOK_SECRET: %v", err)
		}
	}
	if c.WebhooksFile != "" {
		if _, err := webhook.ReadFile(c.WebhooksFile); err != nil {
			bad("AGENTD_WEBHOOKS_FILE: %v", err)
		}
	}
	if c.WebhookRetryFor < time.Second {
		bad("AGENTD_WEBHOOK_RETRY_FOR must be at least 1s")
	}
	if c.WebhookTimeout < 100*time.Millisecond || c.WebhookTimeout > 5*time.Minute {
		bad("AGENTD_WEBHOOK_TIMEOUT must be between 100ms and 5m")
	}
	if c.Retention < 0 || c.Retention > 0 && c.Retention < time.Second {
		bad("AGENTD_RETENTION must be 0 (keep every chat) or at least 1s")
	}
	c.GuardConfig.validate(bad)
	keys, err := c.apiKeys()
	if err != nil {
		errs = append(errs, err)
	}
	// An empty host (":8080") listens on every interface, like 0.0.0.0.
	if len(keys) == 0 && err == nil && addrErr == nil {
		// Without keys anyone who can reach the port owns every chat, so
		// only the local machine may reach it.
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			bad("AGENTD_ADDR %q is not a loopback address: set AGENTD_API_KEYS (or AGENTD_API_KEYS_FILE) to listen beyond this machine", c.Addr)
		}
	}
	return errors.Join(errs...)
}

// models is the model endpoints' configuration: the models file's endpoints,
// or the single endpoints "openai" of OPENAI_API_KEY and OPENAI_BASE_URL
// and "anthropic" of ANTHROPIC_API_KEY. The retry
// policy and default timeout are filled in by the caller.
func (c *Config) models() (*llm.Config, error) {
	if c.ModelsFile == "" {
		return &llm.Config{OpenAI: llm.OpenAIConfig{APIKey: c.OpenAIAPIKey, BaseURL: c.OpenAIBaseURL},
			Anthropic: llm.AnthropicConfig{APIKey: c.AnthropicAPIKey}}, nil
	}
	if c.OpenAIBaseURL != "" {
		return nil, errors.New("OPENAI_BASE_URL is not used with AGENTD_MODELS_FILE: declare the endpoint in the file (its api_key_env may still be OPENAI_API_KEY)")
	}
	getenv := c.getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	return loadModels(c.ModelsFile, getenv)
}

// apiKeys parses AGENTD_API_KEYS and the keys file into key → tenant.
func (c *Config) apiKeys() (map[string]string, error) {
	keys := map[string]string{}
	var errs []error
	add := func(src, entry string) {
		entry = strings.TrimSpace(entry)
		if entry == "" || strings.HasPrefix(entry, "#") {
			return
		}
		key, tenant, ok := strings.Cut(entry, ":")
		key, tenant = strings.TrimSpace(key), strings.TrimSpace(tenant)
		if !ok || key == "" || tenant == "" {
			errs = append(errs, fmt.Errorf("%s: entry %q is not key:tenant", src, redact(entry)))
			return
		}
		if len(key) < 16 {
			errs = append(errs, fmt.Errorf("%s: key for tenant %q is shorter than 16 characters", src, tenant))
			return
		}
		keys[key] = tenant
	}
	for _, e := range strings.Split(c.APIKeys, ",") {
		add("AGENTD_API_KEYS", e)
	}
	if c.APIKeysFile != "" {
		b, err := os.ReadFile(c.APIKeysFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("AGENTD_API_KEYS_FILE: %w", err))
		}
		for _, line := range strings.Split(string(b), "\n") {
			add("AGENTD_API_KEYS_FILE", line)
		}
	}
	return keys, errors.Join(errs...)
}

func redact(s string) string {
	if len(s) <= 4 {
		return "****"
	}
	return s[:4] + "****"
}

// envReader reads defaults from the environment and remembers malformed
// values, so that a typo in a variable is reported rather than ignored.
type envReader struct {
	getenv func(string) string
	errs   []error
}

func (e *envReader) str(key, def string) string {
	if v := e.getenv(key); v != "" {
		return v
	}
	return def
}

func (e *envReader) int(key string, def int) int {
	v := e.getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s=%q: not an integer", key, v))
		return def
	}
	return n
}

func (e *envReader) duration(key string, def time.Duration) time.Duration {
	v := e.getenv(key)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s=%q: not a duration like 30s", key, v))
		return def
	}
	return d
}

// traces decides whether OpenTelemetry traces are exported. Off by default:
// on with OTEL_TRACES_EXPORTER=otlp, or with an OTLP endpoint set
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) and no
// exporter named; OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none turn
// it off. Only OTLP over HTTP with protobuf is built in.
func (e *envReader) traces() bool {
	if e.bool("OTEL_SDK_DISABLED", false) {
		return false
	}
	on := false
	switch exp := e.getenv("OTEL_TRACES_EXPORTER"); exp {
	case "otlp":
		on = true
	case "", "none":
		on = exp == "" && (e.getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || e.getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "")
	default:
		e.errs = append(e.errs, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: only otlp (or none) is supported", exp))
	}
	if on {
		for _, key := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
			if p := e.getenv(key); p != "" && p != "http/protobuf" {
				e.errs = append(e.errs, fmt.Errorf("%s=%q: only http/protobuf is supported", key, p))
			}
		}
	}
	return on
}

func (e *envReader) bool(key string, def bool) bool {
	v := e.getenv(key)
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s=%q: not true or false", key, v))
		return def
	}
	return b
}

// toolSecrets parses AGENTD_TOOL_SECRETS. Errors never quote a value.
func (c *Config) toolSecrets() (map[string]string, error) {
	if strings.TrimSpace(c.ToolSecrets) == "" {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(c.ToolSecrets), &m); err != nil || m == nil {
		return nil, errors.New(`must be a JSON object of secret names to string values, e.g. {"github": "Bearer …"}`)
	}
	return m, nil
}
