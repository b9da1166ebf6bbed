// Package llm implements chat.ModelClient: the model providers a chat spec can
// name. "replay" answers from the spec's own script and needs no network;
// every other provider is a kind of endpoint the operator configured
// (docs/models.md): "openai" (OpenAI and every compatible server, through
// go-openai), "azure" (Azure OpenAI deployments, through go-openai's Azure
// mode) and "anthropic" (the Messages API, through Anthropic's Go SDK). Each
// endpoint has a per-call timeout, retries with backoff, and limits of its
// own (calls in flight, requests and tokens per minute) with one FIFO queue.
//
// This is the only package that imports go-openai and the Anthropic SDK
// (docs/architecture.md): everything it hands back is in chat's terms.
package llm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/tokencount"
)

// Provider names, as a chat spec's model config spells them. Every provider
// but replay is an endpoint kind.
const (
	ProviderReplay = "replay"
	ProviderOpenAI = KindOpenAI
)

// Defaults for zero values of the configuration.
const (
	DefaultTimeout     = 60 * time.Second
	DefaultMaxRetries  = 4
	DefaultBackoffBase = 500 * time.Millisecond
	DefaultBackoffMax  = 20 * time.Second
)

// SingleEndpoint is the name of the endpoint OpenAIConfig describes.
const SingleEndpoint = "openai"

// SingleAnthropicEndpoint is the name of the endpoint AnthropicConfig
// describes.
const SingleAnthropicEndpoint = "anthropic"

// Config configures a Client. It is filled in by cmd/agentd; this package
// reads no environment.
type Config struct {
	// OpenAI is the single endpoint of OPENAI_API_KEY and OPENAI_BASE_URL,
	// named "openai", used when Endpoints is empty. Its retry fields
	// (MaxRetries, BackoffBase, BackoffMax, HTTPClient, Timeout) are the
	// retry policy of every endpoint.
	OpenAI OpenAIConfig
	// Anthropic is the single endpoint of ANTHROPIC_API_KEY, named
	// "anthropic", used (beside OpenAI's) when Endpoints is empty.
	Anthropic AnthropicConfig
	// Endpoints are the named endpoints of AGENTD_MODELS_FILE.
	Endpoints []Endpoint
	// Default names the endpoint of a model that no endpoint's globs match
	// (of its kind); empty: none.
	Default string
	// Logger receives retry warnings; nil discards them.
	Logger *slog.Logger
	// Registerer is where the client's metrics go; nil registers nothing.
	Registerer prometheus.Registerer
	// TracerProvider traces model calls; nil: no spans.
	TracerProvider trace.TracerProvider
	// Now is the clock of the limits (default time.Now).
	Now func() time.Time
}

// OpenAIConfig configures the single "openai" endpoint, and the retry policy
// of all of them. The endpoint is offered only when APIKey or BaseURL is
// set: a keyless BaseURL is how local OpenAI-compatible servers (vLLM,
// Ollama, a test fake) are used.
type OpenAIConfig struct {
	APIKey string
	// BaseURL is the API root including the version, e.g.
	// "https://api.openai.com/v1" (the default when empty).
	BaseURL string
	// Organization is sent as OpenAI-Organization when set.
	Organization string
	// Timeout bounds one HTTP attempt (default 60s); retries get a fresh one.
	// An endpoint's own Timeout wins.
	Timeout time.Duration
	// MaxRetries is how many times a failed call is retried (default 4, so at
	// most 5 attempts); -1 disables retries.
	MaxRetries int
	// BackoffBase and BackoffMax shape the exponential backoff between
	// attempts (defaults 500ms and 20s). BackoffMax also caps a server's
	// Retry-After, so one slow-down request cannot park a chat for minutes.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// HTTPClient replaces the default client (tests, proxies). Its Timeout
	// should be zero: the per-attempt Timeout above is applied through the
	// request context.
	HTTPClient *http.Client
}

// configured reports whether the operator set the provider up at all.
func (c OpenAIConfig) configured() bool { return c.APIKey != "" || c.BaseURL != "" }

// AnthropicConfig configures the single "anthropic" endpoint: the quickest
// way to Claude, as OPENAI_API_KEY alone is to OpenAI. It is offered when
// APIKey is set (Anthropic's API takes no call without one).
type AnthropicConfig struct {
	APIKey string
	// BaseURL is the API's host, "https://api.anthropic.com" when empty
	// (a test server otherwise: agentd reads no ANTHROPIC_BASE_URL; a
	// gateway is an endpoint of AGENTD_MODELS_FILE).
	BaseURL string
}

// endpoint is the Endpoint the single-endpoint variables describe.
func (c AnthropicConfig) endpoint() Endpoint {
	return Endpoint{Name: SingleAnthropicEndpoint, Kind: KindAnthropic, BaseURL: c.BaseURL, APIKey: c.APIKey}
}

// singleEndpoints are the endpoints of the single-endpoint variables.
func (c Config) singleEndpoints() []Endpoint {
	var eps []Endpoint
	if c.OpenAI.configured() {
		eps = append(eps, c.OpenAI.endpoint())
	}
	if c.Anthropic.APIKey != "" {
		eps = append(eps, c.Anthropic.endpoint())
	}
	return eps
}

// withDefaults returns c with zero values replaced by the defaults.
func (c OpenAIConfig) withDefaults() OpenAIConfig {
	c.Timeout = cmp.Or(c.Timeout, DefaultTimeout)
	c.MaxRetries = cmp.Or(c.MaxRetries, DefaultMaxRetries)
	if c.MaxRetries < 0 {
		c.MaxRetries = 0
	}
	c.BackoffBase = cmp.Or(c.BackoffBase, DefaultBackoffBase)
	c.BackoffMax = cmp.Or(c.BackoffMax, DefaultBackoffMax)
	return c
}

// Validate reports every problem of the configuration at once, joined.
func (c Config) Validate() error {
	var errs []error
	o := c.OpenAI
	if len(c.Endpoints) == 0 {
		for _, ep := range c.singleEndpoints() {
			errs = append(errs, ep.validate()...)
		}
	}
	if o.Timeout < 0 {
		errs = append(errs, fmt.Errorf("model call timeout %v: must not be negative", o.Timeout))
	}
	if o.MaxRetries < -1 {
		errs = append(errs, fmt.Errorf("model call max retries %d: must be -1 (no retries) or more", o.MaxRetries))
	}
	if o.BackoffBase < 0 {
		errs = append(errs, fmt.Errorf("model call backoff base %v: must not be negative", o.BackoffBase))
	}
	if o.BackoffMax < 0 {
		errs = append(errs, fmt.Errorf("model call backoff max %v: must not be negative", o.BackoffMax))
	}
	if d := o.withDefaults(); o.BackoffBase >= 0 && o.BackoffMax >= 0 && d.BackoffBase > d.BackoffMax {
		errs = append(errs, fmt.Errorf("model call backoff base %v is above backoff max %v", d.BackoffBase, d.BackoffMax))
	}
	seen := map[string]bool{}
	for i := range c.Endpoints {
		ep := &c.Endpoints[i]
		errs = append(errs, ep.validate()...)
		if seen[ep.Name] {
			errs = append(errs, fmt.Errorf("endpoint %q is defined twice", ep.Name))
		}
		seen[ep.Name] = true
	}
	if c.Default != "" && !seen[c.Default] {
		errs = append(errs, fmt.Errorf("default endpoint %q is not defined", c.Default))
	}
	return errors.Join(errs...)
}

// endpoint is the Endpoint the single-endpoint variables describe.
func (c OpenAIConfig) endpoint() Endpoint {
	return Endpoint{Name: SingleEndpoint, Kind: KindOpenAI, BaseURL: c.BaseURL, APIKey: c.APIKey, Organization: c.Organization}
}

// Client is the chat.ModelClient of agentd: it dispatches each call on the
// model config's provider and endpoint. It is safe for concurrent use.
type Client struct {
	tracer trace.Tracer
	traced bool // a TracerProvider was given; else no spans are started
	replay replayProvider
	router *router
	// tokens counts tokens for token-limited model contexts.
	tokens *tokencount.Counter
	// fromFile: the endpoints are a models file's, and the single-endpoint
	// variables are not read.
	fromFile bool
}

var _ chat.ModelClient = (*Client)(nil)

// New validates cfg and returns a Client.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("llm config: %w", err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	c := &Client{tracer: tp.Tracer("github.com/agentd/agentd/internal/llm"), traced: cfg.TracerProvider != nil,
		router: &router{byName: map[string]*endpoint{}}, tokens: tokencount.New()}
	eps := cfg.Endpoints
	if len(eps) == 0 {
		eps = cfg.singleEndpoints()
	} else {
		c.fromFile = true
	}
	if len(eps) == 0 {
		return c, nil
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	policy := cfg.OpenAI.withDefaults()
	for _, e := range eps {
		ep, err := newEndpoint(e, policy, logger, m, now)
		if err != nil {
			return nil, err
		}
		c.router.eps = append(c.router.eps, ep)
		c.router.byName[e.Name] = ep
	}
	if cfg.Default != "" {
		c.router.def = c.router.byName[cfg.Default]
	}
	return c, nil
}

// Providers lists the providers a spec may name: always "replay", and the
// kinds of the configured endpoints. The server rejects specs naming
// anything else at create time rather than failing the chat later.
func (c *Client) Providers() []string {
	p := []string{ProviderReplay}
	for _, k := range kinds {
		if slices.ContainsFunc(c.router.eps, func(ep *endpoint) bool { return ep.cfg.Kind == k }) {
			p = append(p, k)
		}
	}
	return p
}

// ProviderSetup says how an operator offers provider, an endpoint kind this
// server has no endpoint of, so that a spec naming it is refused with what
// to set rather than only the providers offered; "" when provider is no
// endpoint kind.
func (c *Client) ProviderSetup(provider string) string {
	if !slices.Contains(kinds, provider) {
		return ""
	}
	if c.fromFile {
		key := map[string]string{KindOpenAI: "OPENAI_API_KEY", KindAnthropic: "ANTHROPIC_API_KEY", KindAzure: "AZURE_OPENAI_API_KEY"}[provider]
		return fmt.Sprintf("to offer it, add an endpoint of kind %s to AGENTD_MODELS_FILE (its api_key_env may be %s)", provider, key)
	}
	switch provider {
	case KindOpenAI:
		return "to offer it, set OPENAI_API_KEY (or OPENAI_BASE_URL for an OpenAI-compatible server) where agentd runs, or add an endpoint of kind openai to AGENTD_MODELS_FILE"
	case KindAnthropic:
		return "to offer it, set ANTHROPIC_API_KEY where agentd runs, or add an endpoint of kind anthropic to AGENTD_MODELS_FILE"
	default:
		return fmt.Sprintf("to offer it, add an endpoint of kind %s to AGENTD_MODELS_FILE", provider)
	}
}

// Endpoints names the configured endpoints, in configuration order.
func (c *Client) Endpoints() []string {
	names := make([]string, len(c.router.eps))
	for i, ep := range c.router.eps {
		names[i] = ep.cfg.Name
	}
	return names
}

// Complete makes one model call. Errors are final: retries have already
// happened inside.
//
// A chat waiting on its model waits under this frame, so the frame is kept
// small (the span is started and ended by functions of its own): a waiting
// chat's stack is as large as the frames it waits under.
func (c *Client) Complete(ctx context.Context, req *chat.ModelRequest) (resp *chat.ModelResponse, err error) {
	if req == nil {
		return nil, errors.New("model request is nil")
	}
	ctx, span := c.startSpan(ctx, req)
	defer endSpan(span, &resp, &err)
	if req.Config.Provider == ProviderReplay {
		return c.replay.complete(ctx, req)
	}
	ep, err := c.endpointFor(req)
	if err != nil {
		return nil, err
	}
	return ep.complete(ctx, req)
}

// endpointFor is the endpoint that answers req, or why none does. It is a
// frame of its own so that its error values are not in Complete's.
//
//go:noinline
func (c *Client) endpointFor(req *chat.ModelRequest) (*endpoint, error) {
	if p := req.Config.Provider; !slices.Contains(c.Providers(), p) {
		if how := c.ProviderSetup(p); how != "" {
			return nil, fmt.Errorf("model provider %q is not configured on this server (no endpoint of kind %s): %s", p, p, how)
		}
		return nil, c.unknownProvider(p)
	}
	ep, rerr := c.router.route(&req.Config)
	if rerr != nil {
		return nil, fmt.Errorf("model of %s: %s", callerName(req.Caller), rerr.Message)
	}
	return ep, nil
}

// startSpan starts the span of a model call; without tracing, none (nil):
// a span that records nothing would only cost the waiting chat memory.
//
//go:noinline
func (c *Client) startSpan(ctx context.Context, req *chat.ModelRequest) (context.Context, trace.Span) {
	if !c.traced {
		return ctx, nil
	}
	return c.tracer.Start(ctx, "model.call", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("chat_id", req.ChatID), attribute.String("gen_ai.provider.name", req.Config.Provider),
		attribute.String("gen_ai.request.model", req.Config.Model), attribute.String("agentd.caller", callerName(req.Caller))))
}

// endSpan ends the span of a model call with its outcome.
func endSpan(span trace.Span, resp **chat.ModelResponse, err *error) {
	if span == nil {
		return
	}
	if *err != nil {
		span.RecordError(*err)
		span.SetStatus(codes.Error, (*err).Error())
	} else if *resp != nil {
		span.SetAttributes(attribute.Int64("gen_ai.usage.input_tokens", (*resp).Usage.PromptTokens),
			attribute.Int64("gen_ai.usage.output_tokens", (*resp).Usage.CompletionTokens))
	}
	span.End()
}

func (c *Client) unknownProvider(p string) error {
	return fmt.Errorf("unknown model provider %q (configured: %v)", p, c.Providers())
}

// Close releases idle HTTP connections. The Client must not be used after.
func (c *Client) Close() error {
	for _, ep := range c.router.eps {
		ep.http.CloseIdleConnections()
	}
	return nil
}

// callerName names a caller in errors and logs.
func callerName(caller string) string {
	if caller == "" {
		return "the speaker selector"
	}
	return fmt.Sprintf("agent %q", caller)
}
