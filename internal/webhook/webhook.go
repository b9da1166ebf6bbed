// Package webhook sends a chat's events to webhook endpoints (docs/backend.md):
// the endpoint a spec names (its "webhook") and the tenant endpoints of the
// operator's webhooks file. Deliveries follow Standard Webhooks
// (https://www.standardwebhooks.com): a webhook-id that is the same on every
// attempt, a webhook-timestamp and a v1 HMAC-SHA256 webhook-signature.
//
// Delivery is at least once. The append that writes an event also writes
// its deliveries to an outbox in the same transaction (Router.Route decides
// which); a Dispatcher on every replica claims due deliveries from the
// outbox (SKIP LOCKED on Postgres), sends them, and records the outcome,
// retrying failures with exponential backoff and jitter until the retry
// window ends. A replica that dies during an attempt leaves the delivery to
// be claimed again once the attempt's lease runs out.
package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/spec/problem"
)

// Events are the event types a webhook may subscribe to: every persisted
// event of a chat's log.
var Events = []chat.EventType{chat.EventChatCreated, chat.EventChatRunning, chat.EventSpeakerSelected, chat.EventMessage,
	chat.EventInputRequested, chat.EventChatCompleted, chat.EventChatFailed, chat.EventChatCancelled, chat.EventRunStarted,
	chat.EventContextUpdated}

// DefaultEvents are what a webhook receives when it names none: the end of
// the chat (or of a run), a request for human input, and the start of a
// run. These are what an application waits for.
var DefaultEvents = []chat.EventType{chat.EventChatCompleted, chat.EventChatFailed, chat.EventChatCancelled,
	chat.EventInputRequested, chat.EventRunStarted}

// Endpoint is a tenant endpoint of the webhooks file: every chat of Tenant
// sends its events of the listed types (default DefaultEvents) to URL,
// signed with Secret (default: the server's secret).
type Endpoint struct {
	Tenant string   `json:"tenant"`
	URL    string   `json:"url"`
	Events []string `json:"events,omitempty"`
	Secret string   `json:"secret,omitempty"`
}

// ReadFile reads the webhooks file: a JSON array of endpoints. Unknown
// fields are an error, so that a typo is not a silently ignored option.
func ReadFile(path string) ([]Endpoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read webhooks file: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var eps []Endpoint
	if err := dec.Decode(&eps); err != nil {
		return nil, fmt.Errorf("webhooks file %s: want a JSON array of {\"tenant\", \"url\", \"events\"?, \"secret\"?}: %w", path, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("webhooks file %s: more than one JSON value", path)
	}
	return eps, nil
}

// secretPrefix starts a Standard Webhooks secret; the rest is base64.
const secretPrefix = "whsec_"

// ParseSecret decodes a "whsec_<base64>" secret into the HMAC key.
func ParseSecret(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(s, secretPrefix)
	if !ok {
		return nil, errors.New(`a webhook secret starts with "whsec_" followed by base64`)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, errors.New(`a webhook secret is "whsec_" followed by base64: the rest is not base64`)
	}
	if len(key) < 24 || len(key) > 64 {
		return nil, fmt.Errorf("a webhook secret's key must be 24 to 64 bytes, got %d", len(key))
	}
	return key, nil
}

// Sign returns the webhook-signature header of a delivery: "v1," and the
// base64 HMAC-SHA256, keyed with key, of "<id>.<timestamp>.<body>".
func Sign(key []byte, id string, timestamp int64, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(strconv.FormatInt(timestamp, 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// Verify reports whether header (a webhook-signature, which may list
// several space-separated signatures) holds a valid v1 signature of the
// delivery under key. Receivers written in Go can use it; the tests do.
func Verify(key []byte, id string, timestamp int64, body []byte, header string) bool {
	want := Sign(key, id, timestamp, body)
	for _, sig := range strings.Fields(header) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return true
		}
	}
	return false
}

// URLChecker applies the server's address rules to a URL it is to call
// (the tools' allow-list and address policy); internal/tool implements it.
type URLChecker interface {
	CheckURL(s string) (*url.URL, string)
}

// target is where a chat's events of some types go.
type target struct {
	url    string
	events []chat.EventType
	source string
	// key signs the deliveries; nil: the server's secret.
	key []byte
}

func (t *target) wants(e chat.EventType) bool {
	return slices.Contains(t.events, e)
}

// Router decides which of a chat's events go where (chat.Webhooks), and
// checks the webhooks of specs.
type Router struct {
	check    URLChecker
	key      []byte
	byTenant map[string][]target
	// keys are the secrets of the tenant endpoints, by tenant and URL.
	keys map[string][]byte
	// wake is signalled when deliveries were committed (Queued).
	wake chan struct{}
}

var _ chat.Webhooks = (*Router)(nil)

// RouterConfig configures a Router.
type RouterConfig struct {
	// Secret is the server's whsec_ secret (AGENTD_WEBHOOK_SECRET): it
	// signs the deliveries of specs' webhooks and of tenant endpoints
	// without their own. Empty: specs may not name a webhook.
	Secret string
	// Endpoints are the tenant endpoints (AGENTD_WEBHOOKS_FILE).
	Endpoints []Endpoint
	// Check applies the address rules to every URL.
	Check URLChecker
}

// NewRouter validates cfg, reporting every problem at once.
func NewRouter(cfg RouterConfig) (*Router, error) {
	r := &Router{check: cfg.Check, byTenant: map[string][]target{}, keys: map[string][]byte{}, wake: make(chan struct{}, 1)}
	var errs []error
	if cfg.Check == nil {
		errs = append(errs, errors.New("webhooks need the address rules (a URL checker)"))
	}
	if cfg.Secret != "" {
		key, err := ParseSecret(cfg.Secret)
		if err != nil {
			errs = append(errs, fmt.Errorf("AGENTD_WEBHOOK_SECRET: %w", err))
		}
		r.key = key
	}
	for i, ep := range cfg.Endpoints {
		where := fmt.Sprintf("webhooks file, endpoint %d", i)
		t := target{url: ep.URL, source: chat.DeliveryTenant}
		if ep.Tenant == "" {
			errs = append(errs, fmt.Errorf("%s: tenant is required", where))
		}
		if ep.URL == "" {
			errs = append(errs, fmt.Errorf("%s: url is required", where))
		} else if cfg.Check != nil {
			if _, msg := cfg.Check.CheckURL(ep.URL); msg != "" {
				errs = append(errs, fmt.Errorf("%s: url %s", where, msg))
			}
		}
		evs, probs := parseEvents(ep.Events)
		for _, p := range probs {
			errs = append(errs, fmt.Errorf("%s: events%s: %s", where, p.Path, p.Message))
		}
		t.events = evs
		switch {
		case ep.Secret != "":
			key, err := ParseSecret(ep.Secret)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: secret: %w", where, err))
			}
			t.key = key
		case cfg.Secret == "":
			errs = append(errs, fmt.Errorf("%s: no secret, and AGENTD_WEBHOOK_SECRET is not set: every delivery must be signed", where))
		}
		for _, o := range r.byTenant[ep.Tenant] {
			if o.url == ep.URL {
				errs = append(errs, fmt.Errorf("%s: tenant %q has the url %s twice", where, ep.Tenant, ep.URL))
			}
		}
		r.byTenant[ep.Tenant] = append(r.byTenant[ep.Tenant], t)
		r.keys[ep.Tenant+"\x00"+ep.URL] = t.key
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return r, nil
}

// parseEvents checks a list of event types; none means DefaultEvents.
func parseEvents(names []string) ([]chat.EventType, []spec.Problem) {
	if names == nil {
		return DefaultEvents, nil
	}
	var (
		out   []chat.EventType
		probs problem.List
	)
	if len(names) == 0 {
		probs.Add("", "must name at least one event type (leave it out for the default)")
	}
	for i, n := range names {
		e := chat.EventType(n)
		switch {
		case !slices.Contains(Events, e):
			probs.Add(problem.Index("", i), "%q is not an event type a webhook can receive: one of %s", n, eventList())
		case slices.Contains(out, e):
			probs.Add(problem.Index("", i), "%q is listed twice", n)
		default:
			out = append(out, e)
		}
	}
	return out, probs.Items()
}

func eventList() string {
	s := make([]string, len(Events))
	for i, e := range Events {
		s[i] = string(e)
	}
	return strings.Join(s, ", ")
}

// maxURLBytes bounds a webhook URL.
const maxURLBytes = 2048

// CheckWebhook implements spec.WebhookChecker: a spec's webhook needs the
// server's secret, a URL the address rules allow, and known event types.
func (r *Router) CheckWebhook(w *spec.Webhook) []spec.Problem {
	var probs problem.List
	if r.key == nil {
		probs.Add("", "this server signs no webhooks of specs: the operator enables them with AGENTD_WEBHOOK_SECRET")
	}
	switch {
	case w.URL == "":
		probs.Add("/url", "is required")
	case len(w.URL) > maxURLBytes:
		probs.Add("/url", "must be at most %d bytes", maxURLBytes)
	default:
		if _, msg := r.check.CheckURL(w.URL); msg != "" {
			probs.Add("/url", "%s", msg)
		}
	}
	_, eprobs := parseEvents(w.Events)
	probs.AddAll("/events", eprobs)
	return probs.Items()
}

// Route implements chat.Webhooks. A chat without a webhook of its own, of
// a tenant without endpoints, costs one map lookup; no event that goes
// nowhere costs an allocation.
func (r *Router) Route(tenant string, hook *spec.Webhook, evs []chat.Event) []chat.Delivery {
	tenantTargets := r.byTenant[tenant]
	if hook == nil && len(tenantTargets) == 0 {
		return nil
	}
	var out []chat.Delivery
	for _, e := range evs {
		toHook := hook != nil && hookWants(hook, e.Type)
		if toHook {
			out = append(out, chat.Delivery{Seq: e.Seq, Event: e.Type, URL: hook.URL, Source: chat.DeliverySpec})
		}
		for i := range tenantTargets {
			t := &tenantTargets[i]
			// One delivery per event and URL: the spec's own wins.
			if t.wants(e.Type) && !(toHook && t.url == hook.URL) {
				out = append(out, chat.Delivery{Seq: e.Seq, Event: e.Type, URL: t.url, Source: chat.DeliveryTenant})
			}
		}
	}
	return out
}

// hookWants reports whether a spec's webhook receives events of type e.
func hookWants(hook *spec.Webhook, e chat.EventType) bool {
	if hook.Events == nil {
		return slices.Contains(DefaultEvents, e)
	}
	return slices.Contains(hook.Events, string(e))
}

// Queued implements chat.Webhooks: it wakes the dispatcher.
func (r *Router) Queued() {
	select {
	case r.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// keyFor returns the key that signs a delivery: a tenant endpoint's own,
// else the server's. nil: none (a tenant endpoint removed from the file,
// on a server without a secret of its own).
func (r *Router) keyFor(d *chat.DeliveryRecord) []byte {
	if d.Source == chat.DeliveryTenant {
		if k := r.keys[d.Tenant+"\x00"+d.URL]; k != nil {
			return k
		}
	}
	return r.key
}

// timestamp is the webhook-timestamp of a delivery sent at t.
func timestamp(t time.Time) int64 { return t.Unix() }
