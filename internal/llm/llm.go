// Package llm implements chat.ModelClient: the model providers a chat spec can
// name. "replay" answers from the spec's own script and needs no network;
// "openai" calls an OpenAI-compatible chat-completions endpoint through
// go-openai, with a per-call timeout and retries.
//
// This is the only package that imports go-openai (DESIGN §1): everything it
// hands back is in chat's terms.
package llm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentd/agentd/internal/chat"
)

// Provider names, as a chat spec's model config spells them.
const (
	ProviderReplay = "replay"
	ProviderOpenAI = "openai"
)

// Defaults for OpenAIConfig's zero values.
const (
	DefaultTimeout     = 60 * time.Second
	DefaultMaxRetries  = 4
	DefaultBackoffBase = 500 * time.Millisecond
	DefaultBackoffMax  = 20 * time.Second
)

// Config configures a Client. It is filled in by cmd/agentd; this package
// reads no environment.
type Config struct {
	OpenAI OpenAIConfig
	// Logger receives retry warnings; nil discards them.
	Logger *slog.Logger
	// Registerer is where the client's metrics go; nil registers nothing.
	Registerer prometheus.Registerer
	// TracerProvider traces model calls; nil: no spans.
	TracerProvider trace.TracerProvider
}

// OpenAIConfig configures the "openai" provider. The provider is offered only
// when APIKey or BaseURL is set: a keyless BaseURL is how local
// OpenAI-compatible servers (vLLM, Ollama, a test fake) are used.
type OpenAIConfig struct {
	APIKey string
	// BaseURL is the API root including the version, e.g.
	// "https://api.openai.com/v1" (the default when empty).
	BaseURL string
	// Organization is sent as OpenAI-Organization when set.
	Organization string
	// Timeout bounds one HTTP attempt (default 60s); retries get a fresh one.
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
	if o.BaseURL != "" {
		u, err := url.Parse(o.BaseURL)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("openai base URL: %w", err))
		case u.Scheme != "http" && u.Scheme != "https":
			errs = append(errs, fmt.Errorf("openai base URL %q: scheme must be http or https", o.BaseURL))
		case u.Host == "":
			errs = append(errs, fmt.Errorf("openai base URL %q: no host", o.BaseURL))
		}
	}
	if o.Timeout < 0 {
		errs = append(errs, fmt.Errorf("openai timeout %v: must not be negative", o.Timeout))
	}
	if o.MaxRetries < -1 {
		errs = append(errs, fmt.Errorf("openai max retries %d: must be -1 (no retries) or more", o.MaxRetries))
	}
	if o.BackoffBase < 0 {
		errs = append(errs, fmt.Errorf("openai backoff base %v: must not be negative", o.BackoffBase))
	}
	if o.BackoffMax < 0 {
		errs = append(errs, fmt.Errorf("openai backoff max %v: must not be negative", o.BackoffMax))
	}
	if d := o.withDefaults(); o.BackoffBase >= 0 && o.BackoffMax >= 0 && d.BackoffBase > d.BackoffMax {
		errs = append(errs, fmt.Errorf("openai backoff base %v is above backoff max %v", d.BackoffBase, d.BackoffMax))
	}
	return errors.Join(errs...)
}

// Client is the chat.ModelClient of agentd: it dispatches each call on the
// model config's provider. It is safe for concurrent use.
type Client struct {
	tracer trace.Tracer
	traced bool // a TracerProvider was given; else no spans are started
	replay replayProvider
	openai *openAIProvider // nil when not configured
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
	c := &Client{tracer: tp.Tracer("github.com/agentd/agentd/internal/llm"), traced: cfg.TracerProvider != nil}
	if cfg.OpenAI.configured() {
		m, err := newMetrics(cfg.Registerer)
		if err != nil {
			return nil, err
		}
		c.openai = newOpenAIProvider(cfg.OpenAI.withDefaults(), logger, m)
	}
	return c, nil
}

// Providers lists the providers a spec may name: always "replay", and
// "openai" when it is configured. The server rejects specs naming anything
// else at create time rather than failing the chat later.
func (c *Client) Providers() []string {
	p := []string{ProviderReplay}
	if c.openai != nil {
		p = append(p, ProviderOpenAI)
	}
	return p
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
	switch p := req.Config.Provider; p {
	case ProviderReplay:
		return c.replay.complete(ctx, req)
	case ProviderOpenAI:
		if c.openai == nil {
			return nil, errors.New("model provider \"openai\" is not configured on this server (set OPENAI_API_KEY or OPENAI_BASE_URL)")
		}
		return c.openai.complete(ctx, req)
	default:
		return nil, c.unknownProvider(p)
	}
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
	if c.openai != nil {
		c.openai.http.CloseIdleConnections()
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
