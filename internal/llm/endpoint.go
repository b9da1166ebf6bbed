package llm

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/spec/problem"
)

// Endpoint kinds: the wire format an endpoint speaks. A spec's provider
// (other than "replay") is the kind of endpoint that serves its model.
const (
	// KindOpenAI is OpenAI's chat-completions API and every server that
	// speaks it (vLLM, Ollama's /v1, LiteLLM, Gemini's compatible endpoint).
	KindOpenAI = "openai"
	// KindAzure is an Azure OpenAI resource: deployment URLs, the api-key
	// header and an api-version.
	KindAzure = "azure"
	// KindAnthropic is Anthropic's Messages API.
	KindAnthropic = "anthropic"
)

// kinds in the order they are listed in messages.
var kinds = []string{KindOpenAI, KindAzure, KindAnthropic}

// Default base URLs of the kinds that have one.
const (
	defaultOpenAIBaseURL    = "https://api.openai.com/v1"
	defaultAnthropicBaseURL = "https://api.anthropic.com"
)

// Endpoint is one named model endpoint of the server's configuration
// (AGENTD_MODELS_FILE, or the single endpoint "openai" of OPENAI_API_KEY and
// OPENAI_BASE_URL). Its key is never logged, exported or shown in an error.
type Endpoint struct {
	// Name is what a spec's model names as its endpoint.
	Name string
	// Kind is KindOpenAI, KindAzure or KindAnthropic.
	Kind string
	// BaseURL is the API root: for openai including the version
	// ("https://api.openai.com/v1", the default), for azure the resource
	// ("https://contoso.openai.azure.com", required), for anthropic the
	// host ("https://api.anthropic.com", the default).
	BaseURL string
	// APIKey is sent as the kind sends it: a bearer token (openai,
	// anthropic) or the api-key header (azure). Empty: no key (local
	// OpenAI-compatible servers).
	APIKey string
	// Organization is sent as OpenAI-Organization (openai only).
	Organization string
	// APIVersion is Azure's api-version query parameter (azure, required).
	APIVersion string
	// Deployment is the Azure deployment every call goes to; empty: the
	// deployment named like the model (azure only).
	Deployment string
	// Headers are sent with every request (a gateway's own headers).
	Headers map[string]string
	// Models are globs of the model names this endpoint serves ('*' any
	// run of characters, '?' one); empty: any model, when the spec names
	// the endpoint or no other endpoint of its kind matches.
	Models []string
	// MaxConcurrency caps the calls in flight from this replica (0: no cap).
	MaxConcurrency int
	// RPM caps the requests started per minute from this replica, spaced
	// evenly (0: no cap).
	RPM int
	// TPM caps the tokens (prompt and completion) per minute from this
	// replica (0: no cap).
	TPM int
	// Timeout bounds one HTTP attempt (default: the Config's Timeout).
	Timeout time.Duration
	// H2C speaks HTTP/2 without TLS to an http:// BaseURL, with prior
	// knowledge (no upgrade from HTTP/1.1): the server must serve it. Every
	// call in flight is then a stream of a few shared connections instead
	// of a connection of its own (with two goroutines and their buffers),
	// and one read takes the tokens of many replies. Over https HTTP/2 is
	// negotiated through TLS without it.
	H2C bool
}

// endpointNameRE is what an endpoint may be called: a spec names it.
var endpointNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// reservedHeaders are the headers a kind sets itself: the key and the
// protocol's own. An endpoint's Headers may not set them, so a key is only
// ever configured as a key.
var reservedHeaders = []string{"Authorization", "Api-Key", "X-Api-Key", "Anthropic-Version", "Content-Type", "Content-Length", "Host"}

// validate reports every problem of one endpoint.
func (e *Endpoint) validate() []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("endpoint %q: "+format, append([]any{e.Name}, args...)...))
	}
	if !endpointNameRE.MatchString(e.Name) {
		errs = append(errs, fmt.Errorf("endpoint name %q: must match %s", e.Name, endpointNameRE))
	}
	if !slices.Contains(kinds, e.Kind) {
		bad("kind %q: must be one of %s", e.Kind, strings.Join(kinds, ", "))
	}
	switch {
	case e.BaseURL == "" && e.Kind == KindAzure:
		bad("base_url is required for kind azure (the resource, https://NAME.openai.azure.com)")
	case e.BaseURL != "":
		u, err := url.Parse(e.BaseURL)
		switch {
		case err != nil:
			bad("base_url: does not parse as a URL")
		case u.User != nil:
			bad("base_url: must not hold credentials; give the key as api_key_env or api_key_file")
		case u.Scheme != "http" && u.Scheme != "https":
			bad("base_url %q: scheme must be http or https", e.BaseURL)
		case u.Host == "":
			bad("base_url %q: no host", e.BaseURL)
		case u.RawQuery != "" || u.Fragment != "":
			bad("base_url %q: must have no query or fragment", e.BaseURL)
		}
	}
	if e.Kind == KindAzure && e.APIVersion == "" {
		bad("api_version is required for kind azure")
	}
	if e.Kind != KindAzure && (e.APIVersion != "" || e.Deployment != "") {
		bad("api_version and deployment are for kind azure only")
	}
	if e.Kind != KindOpenAI && e.Organization != "" {
		bad("organization is for kind openai only")
	}
	if e.APIKey == "" && e.Kind != KindOpenAI {
		bad("a key is required for kind %s (api_key_env or api_key_file)", e.Kind)
	}
	for name, v := range e.Headers {
		switch {
		case name == "" || strings.ContainsAny(name, " \t\r\n:") || !isToken(name):
			bad("header name %q is not a valid HTTP header name", name)
		case slices.Contains(reservedHeaders, textproto.CanonicalMIMEHeaderKey(name)):
			bad("header %q is set by agentd itself; give a key as api_key_env or api_key_file", name)
		case strings.ContainsAny(v, "\r\n\x00"):
			bad("header %q: value holds a line break", name)
		}
	}
	for _, g := range e.Models {
		if strings.TrimSpace(g) == "" {
			bad("models: an empty glob")
		}
	}
	if e.MaxConcurrency < 0 || e.RPM < 0 || e.TPM < 0 {
		bad("max_concurrency, rpm and tpm must not be negative")
	}
	if e.Timeout < 0 {
		bad("timeout must not be negative")
	}
	if e.H2C && !strings.HasPrefix(e.BaseURL, "http://") {
		bad("h2c is for an http:// base_url, not %q: over https HTTP/2 is negotiated through TLS", cmp.Or(e.BaseURL, "the default"))
	}
	return errs
}

// isToken reports whether s is an HTTP token (RFC 9110 §5.6.2).
func isToken(s string) bool {
	for _, r := range s {
		if r > 0x7e || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

// serves reports whether the endpoint's globs match model; an endpoint
// without globs serves any model.
func (e *Endpoint) serves(model string) bool {
	if len(e.Models) == 0 {
		return true
	}
	return slices.ContainsFunc(e.Models, func(g string) bool { return globMatch(g, model) })
}

// globMatch matches s against a glob of '*' (any run of characters, '/'
// included: model names hold slashes) and '?' (one character).
func globMatch(glob, s string) bool {
	for glob != "" {
		switch glob[0] {
		case '*':
			glob = strings.TrimLeft(glob, "*")
			if glob == "" {
				return true
			}
			for i := range len(s) + 1 {
				if globMatch(glob, s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if s == "" {
				return false
			}
			_, n := utf8.DecodeRuneInString(s)
			glob, s = glob[1:], s[n:]
		default:
			if s == "" || s[0] != glob[0] {
				return false
			}
			glob, s = glob[1:], s[1:]
		}
	}
	return s == ""
}

// router decides which endpoint serves a spec's model (docs/models.md): the
// endpoint the model names; else the first endpoint of the provider's kind
// whose globs match the model; else the default, if it is of that kind; else
// the first endpoint of that kind without globs.
type router struct {
	eps    []*endpoint
	byName map[string]*endpoint
	def    *endpoint
}

// routeError says why no endpoint serves a model; Path is relative to the
// model object.
type routeError struct {
	Path, Message string
}

func (e *routeError) Error() string { return e.Message }

func (r *router) route(m *spec.Model) (*endpoint, *routeError) {
	if m.Endpoint != "" {
		ep, ok := r.byName[m.Endpoint]
		switch {
		case !ok:
			return nil, &routeError{"/endpoint", fmt.Sprintf("names no endpoint of this server: %q; configured: %s", m.Endpoint, r.list())}
		case ep.cfg.Kind != m.Provider:
			return nil, &routeError{"/endpoint", fmt.Sprintf("endpoint %q is of kind %s, not %s (the model's provider)", m.Endpoint, ep.cfg.Kind, m.Provider)}
		case !ep.cfg.serves(m.Model):
			return nil, &routeError{"/model", fmt.Sprintf("endpoint %q does not serve model %q (it serves %s)", m.Endpoint, m.Model, quoteAll(ep.cfg.Models))}
		}
		return ep, nil
	}
	for _, ep := range r.eps {
		if ep.cfg.Kind == m.Provider && len(ep.cfg.Models) > 0 && ep.cfg.serves(m.Model) {
			return ep, nil
		}
	}
	if r.def != nil && r.def.cfg.Kind == m.Provider && r.def.cfg.serves(m.Model) {
		return r.def, nil
	}
	for _, ep := range r.eps {
		if ep.cfg.Kind == m.Provider && len(ep.cfg.Models) == 0 {
			return ep, nil
		}
	}
	return nil, &routeError{"/model", fmt.Sprintf("no endpoint of kind %s serves model %q; configured: %s", m.Provider, m.Model, r.list())}
}

// list names the endpoints for error messages: name (kind: globs).
func (r *router) list() string {
	if len(r.eps) == 0 {
		return "none"
	}
	parts := make([]string, len(r.eps))
	for i, ep := range r.eps {
		serves := "any model"
		if len(ep.cfg.Models) > 0 {
			serves = strings.Join(ep.cfg.Models, ", ")
		}
		parts[i] = fmt.Sprintf("%q (%s: %s)", ep.cfg.Name, ep.cfg.Kind, serves)
	}
	return strings.Join(parts, ", ")
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// CheckModel implements spec.ModelChecker: a model of a configured provider
// must be served by one of the endpoints.
func (c *Client) CheckModel(m *spec.Model) []spec.Problem {
	if m.Provider == ProviderReplay || m.Model == "" {
		return nil
	}
	ep, err := c.router.route(m)
	if err != nil {
		return []spec.Problem{{Path: err.Path, Message: err.Message}}
	}
	var probs problem.List
	if ep.cfg.Kind == KindAnthropic {
		// The Messages API (version 2026-10-21, which Anthropic's SDK
		// speaks) has no sampling parameters, seed, response_format,
		// penalties or reasoning_effort: refused here rather than silently
		// dropped. (stop goes as stop_sequences.)
		for _, f := range []struct {
			name string
			set  bool
		}{{"temperature", m.Temperature != nil}, {"top_p", m.TopP != nil}, {"seed", m.Seed != nil}, {"response_format", len(m.ResponseFormat) > 0 && string(m.ResponseFormat) != "null"},
			{"frequency_penalty", m.FrequencyPenalty != nil}, {"presence_penalty", m.PresencePenalty != nil}, {"reasoning_effort", m.ReasoningEffort != ""}} {
			if f.set {
				probs.Add("/"+f.name, "endpoint %q is of kind anthropic, whose Messages API has no %s", ep.cfg.Name, f.name)
			}
		}
	}
	return probs.Items()
}

// ClientRef is what a team file's model client says about where it calls:
// what MatchEndpoint maps onto a configured endpoint.
type ClientRef struct {
	// Kind is the endpoint kind the client speaks.
	Kind string
	// Model is the client's model name.
	Model string
	// BaseURL is the client's base_url (OpenAI, Anthropic) or
	// azure_endpoint (Azure), if any.
	BaseURL string
	// Deployment is an Azure client's azure_deployment, if any.
	Deployment string
}

// MatchEndpoint maps a team file's model client onto the endpoint that
// serves it: by base URL (and Azure deployment) when the client names one,
// else by model as a spec's model is routed. The error lists the
// configured endpoints.
func (c *Client) MatchEndpoint(ref ClientRef) (string, error) {
	r := c.router
	if ref.BaseURL != "" {
		want := normalizeURL(ref.BaseURL)
		for _, ep := range r.eps {
			if ep.cfg.Kind != ref.Kind || normalizeURL(ep.baseURL) != want {
				continue
			}
			if ref.Kind == KindAzure && ref.Deployment != "" && ep.cfg.Deployment != "" && ep.cfg.Deployment != ref.Deployment {
				continue
			}
			if ref.Kind == KindAzure && ep.cfg.Deployment == "" && ref.Deployment != "" && ref.Deployment != ref.Model {
				// Without a deployment of its own the endpoint calls the
				// deployment named like the model.
				continue
			}
			return ep.cfg.Name, nil
		}
		what := "base URL " + ref.BaseURL
		if ref.Kind == KindAzure {
			what = "Azure endpoint " + ref.BaseURL
			if ref.Deployment != "" {
				what += " and deployment " + ref.Deployment
			}
		}
		return "", fmt.Errorf("no endpoint of kind %s of this server has the %s; configured: %s", ref.Kind, what, r.list())
	}
	if ref.Kind == KindAzure && ref.Deployment != "" {
		for _, ep := range r.eps {
			if ep.cfg.Kind == KindAzure && (ep.cfg.Deployment == ref.Deployment || ep.cfg.Deployment == "" && ref.Deployment == ref.Model) {
				return ep.cfg.Name, nil
			}
		}
		return "", fmt.Errorf("no endpoint of kind azure of this server has the deployment %s; configured: %s", ref.Deployment, r.list())
	}
	ep, err := r.route(&spec.Model{Provider: ref.Kind, Model: ref.Model})
	if err != nil {
		return "", errors.New(err.Message)
	}
	return ep.cfg.Name, nil
}

// EndpointInfo is what may be told about an endpoint outside the server:
// everything but its key and headers.
type EndpointInfo struct {
	Name, Kind, BaseURL, APIVersion, Deployment string
}

// EndpointInfo describes the named endpoint; ok is false for an unknown
// name.
func (c *Client) EndpointInfo(name string) (EndpointInfo, bool) {
	ep, ok := c.router.byName[name]
	if !ok {
		return EndpointInfo{}, false
	}
	return EndpointInfo{Name: ep.cfg.Name, Kind: ep.cfg.Kind, BaseURL: ep.baseURL, APIVersion: ep.cfg.APIVersion, Deployment: ep.cfg.Deployment}, true
}

// normalizeURL makes base URLs comparable: no trailing slash, lower-case
// scheme and host.
func normalizeURL(s string) string {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return strings.TrimRight(s, "/")
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = strings.ToLower(u.Host)
	u.Path = strings.TrimRight(u.Path, "/")
	return u.String()
}

// headerSetter adds an endpoint's own headers to every request.
type headerSetter struct {
	next    doer
	headers map[string]string
}

// doer is what sends an HTTP request: an *http.Client or a wrapper.
type doer interface {
	Do(*http.Request) (*http.Response, error)
}

func (h headerSetter) Do(r *http.Request) (*http.Response, error) {
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return h.next.Do(r)
}
