package webhook

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentd/agentd/internal/api"
	"github.com/agentd/agentd/internal/chat"
)

// Store is what the dispatcher needs of the store: the outbox.
type Store interface {
	ClaimDeliveries(ctx context.Context, p *chat.ClaimDeliveriesParams) ([]chat.ClaimedDelivery, error)
	MarkDeliverySent(ctx context.Context, p *chat.MarkDeliverySentParams) error
	FinishDelivery(ctx context.Context, p *chat.FinishDeliveryParams) error
}

// Defaults of DispatcherConfig.
const (
	DefaultRetryFor     = 24 * time.Hour
	DefaultTimeout      = 10 * time.Second
	DefaultPoll         = time.Second
	DefaultConcurrency  = 16
	DefaultFirstBackoff = time.Second
	DefaultMaxBackoff   = time.Hour
	// leaseSlack is added to the timeout for a claimed delivery's lease:
	// time to record the outcome after the request ended.
	leaseSlack = 5 * time.Second
	// maxErrorBody is how much of a failed answer's body goes into the
	// delivery's last_error.
	maxErrorBody = 256
)

// DispatcherConfig configures a Dispatcher.
type DispatcherConfig struct {
	Store  Store
	Router *Router
	// Owner names this replica in the deliveries it sends (the chat
	// runtime's owner name); "" leaves them unnamed.
	Owner string
	// Transport sends the requests; its dialer must enforce the address
	// policy (internal/tool's Transport).
	Transport http.RoundTripper
	// RetryFor is how long after its event a delivery is retried (default
	// 24h); past it, a delivery that keeps failing is failed.
	RetryFor time.Duration
	// Timeout bounds one attempt (default 10s).
	Timeout time.Duration
	// Poll is how often the outbox is looked at without a wake-up (default
	// 1s): deliveries of other replicas' chats and retries that fall due.
	Poll time.Duration
	// Concurrency is how many attempts run at once (default 16).
	Concurrency int
	// FirstBackoff is the wait after the first failed attempt (default
	// 1s); it doubles with each attempt up to MaxBackoff (default 1h), and
	// each wait is drawn at random from its upper half (jitter).
	FirstBackoff time.Duration
	MaxBackoff   time.Duration
	Logger       *slog.Logger
	Registerer   prometheus.Registerer
	Now          func() time.Time
}

// Dispatcher delivers the outbox's due deliveries. Every replica runs one.
type Dispatcher struct {
	cfg     DispatcherConfig
	client  *http.Client
	log     *slog.Logger
	metrics *dispatchMetrics

	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	started bool
	stopped bool
}

type dispatchMetrics struct {
	attempts *prometheus.CounterVec
	seconds  prometheus.Histogram
	errors   prometheus.Counter
}

// Outcomes of an attempt, the values of the outcome label.
const (
	outcomeDelivered = "delivered"  // 2xx
	outcomeRetry     = "retry"      // failed, tried again later
	outcomeFailed    = "failed"     // failed for good: the retry window is over, or the event is gone
	outcomeDisabled  = "disabled"   // 410 Gone, or an earlier 410 of the chat's endpoint
	outcomeRefused   = "refused"    // the URL is no longer allowed, or no secret signs it
	outcomeTakenOver = "taken_over" // the claim's lease ran out and another dispatcher claimed it: nothing sent
)

// NewDispatcher validates cfg and returns a Dispatcher; Start runs it.
func NewDispatcher(cfg DispatcherConfig) (*Dispatcher, error) {
	var errs []error
	if cfg.Store == nil || cfg.Router == nil || cfg.Transport == nil {
		errs = append(errs, errors.New("webhook dispatcher needs a store, a router and a transport"))
	}
	for name, d := range map[string]time.Duration{"retry window": cfg.RetryFor, "timeout": cfg.Timeout, "poll interval": cfg.Poll,
		"first backoff": cfg.FirstBackoff, "max backoff": cfg.MaxBackoff} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("webhook %s %v must not be negative", name, d))
		}
	}
	if cfg.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("webhook concurrency %d must not be negative", cfg.Concurrency))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	cfg.RetryFor = cmp.Or(cfg.RetryFor, DefaultRetryFor)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.Poll = cmp.Or(cfg.Poll, DefaultPoll)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultConcurrency)
	cfg.FirstBackoff = cmp.Or(cfg.FirstBackoff, DefaultFirstBackoff)
	cfg.MaxBackoff = max(cmp.Or(cfg.MaxBackoff, DefaultMaxBackoff), cfg.FirstBackoff)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	reg := cfg.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &dispatchMetrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_webhook_attempts_total",
			Help: "Webhook delivery attempts, by outcome (delivered, retry, failed, disabled, refused, taken_over)."}, []string{"outcome"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "agentd_webhook_attempt_duration_seconds",
			Help: "Duration of webhook requests.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentd_webhook_outbox_errors_total",
			Help: "Failed reads or writes of the webhook outbox (claims, recorded outcomes)."}),
	}
	for _, c := range []prometheus.Collector{m.attempts, m.seconds, m.errors} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register webhook metrics: %w", err)
		}
	}
	for _, o := range []string{outcomeDelivered, outcomeRetry, outcomeFailed, outcomeDisabled, outcomeRefused, outcomeTakenOver} {
		m.attempts.WithLabelValues(o)
	}
	return &Dispatcher{
		cfg: cfg,
		// No redirects: a receiver answers where it was asked (Standard
		// Webhooks), and a 3xx is a failed attempt like any non-2xx.
		client: &http.Client{Transport: cfg.Transport, Timeout: cfg.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		log:     cfg.Logger.With("component", "webhooks"),
		metrics: m,
	}, nil
}

// Start begins delivering. The context only bounds the start.
func (d *Dispatcher) Start(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started {
		return errors.New("webhook dispatcher already started")
	}
	d.started = true
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d.cancel, d.done = cancel, make(chan struct{})
	go func() {
		defer close(d.done)
		d.loop(base)
	}()
	return nil
}

// Stop ends delivering and waits, until ctx ends, for the attempts under
// way. An attempt cut short is claimed again once its lease runs out.
// Safe to call twice or before Start.
func (d *Dispatcher) Stop(ctx context.Context) error {
	d.mu.Lock()
	if !d.started || d.stopped {
		d.mu.Unlock()
		return nil
	}
	d.stopped = true
	d.cancel()
	d.mu.Unlock()
	select {
	case <-d.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stop webhook dispatcher: %w", ctx.Err())
	}
}

// loop claims due deliveries as long as there are some and slots to send
// them, and otherwise waits for a wake-up, a free slot or the poll.
func (d *Dispatcher) loop(ctx context.Context) {
	var inFlight sync.WaitGroup
	defer inFlight.Wait()
	slots := make(chan struct{}, d.cfg.Concurrency)
	freed := make(chan struct{}, 1)
	poll := time.NewTicker(d.cfg.Poll)
	defer poll.Stop()
	for {
		free := cap(slots) - len(slots)
		claimed := 0
		if free > 0 {
			now := d.cfg.Now()
			cs, err := d.cfg.Store.ClaimDeliveries(ctx, &chat.ClaimDeliveriesParams{Now: now,
				LeaseUntil: now.Add(d.cfg.Timeout + leaseSlack), Limit: free})
			if err != nil && ctx.Err() == nil {
				d.metrics.errors.Inc()
				d.log.Error("claim webhook deliveries", "err", err)
			}
			claimed = len(cs)
			for _, c := range cs {
				slots <- struct{}{}
				inFlight.Add(1)
				go func() {
					defer inFlight.Done()
					d.attempt(ctx, &c)
					<-slots
					select {
					case freed <- struct{}{}:
					default:
					}
				}()
			}
		}
		if claimed > 0 && claimed == free {
			continue // there may be more due
		}
		// With every slot busy, a freed slot is worth a claim; otherwise
		// only a wake-up or the poll is.
		var whenFreed <-chan struct{}
		if free == 0 {
			whenFreed = freed
		}
		select {
		case <-ctx.Done():
			return
		case <-d.cfg.Router.wake:
		case <-poll.C:
		case <-whenFreed:
		}
	}
}

// body is a delivery's JSON body: the event as an SSE stream sends it.
type body struct {
	ChatID string `json:"chat_id"`
	Seq    int64  `json:"seq"`
	Event  string `json:"event"`
	Data   any    `json:"data"`
}

// attempt makes one attempt of a claimed delivery and records its outcome.
func (d *Dispatcher) attempt(ctx context.Context, c *chat.ClaimedDelivery) {
	log := d.log.With("chat_id", c.ChatID, "seq", c.Seq, "event", string(c.DeliveryRecord.Event), "url", redact(c.URL),
		"webhook_id", c.WebhookID(), "attempt", c.Attempts)
	switch {
	case c.Event.Seq == 0:
		d.finish(ctx, log, c, outcomeFailed, 0, "the event no longer exists", false)
		return
	case c.Disabled:
		d.finish(ctx, log, c, outcomeDisabled, 0, "the endpoint answered 410 Gone to an earlier delivery of this chat: disabled", false)
		return
	}
	// The URL passed the address rules when the chat was created; the
	// operator may have narrowed them since.
	if _, msg := d.cfg.Router.check.CheckURL(c.URL); msg != "" {
		d.finish(ctx, log, c, outcomeRefused, 0, "refused by this server's address rules: the url "+msg, false)
		return
	}
	key := d.cfg.Router.keyFor(&c.DeliveryRecord)
	if key == nil {
		d.finish(ctx, log, c, outcomeRefused, 0, "no secret to sign it: the tenant endpoint is no longer in the webhooks file and AGENTD_WEBHOOK_SECRET is not set", false)
		return
	}
	payload, err := json.Marshal(body{ChatID: c.ChatID, Seq: c.Seq, Event: string(c.Event.Type), Data: api.EventPayload(c.Event)})
	if err != nil {
		d.finish(ctx, log, c, outcomeFailed, 0, "the event cannot be encoded: "+err.Error(), false)
		return
	}
	id, ts := c.WebhookID(), timestamp(d.cfg.Now())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(payload))
	if err != nil {
		d.finish(ctx, log, c, outcomeFailed, 0, "the request cannot be made: "+err.Error(), false)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "agentd-webhooks")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", Sign(key, id, ts, payload))
	if !d.markSent(ctx, log, c) {
		return
	}
	start := time.Now()
	resp, err := d.client.Do(req)
	d.metrics.seconds.Observe(time.Since(start).Seconds())
	if err != nil {
		if ctx.Err() != nil {
			// Shutting down: the attempt is claimed again after its lease.
			log.Info("webhook attempt cut short by shutdown; it will be retried")
			return
		}
		d.retryOrFail(ctx, log, c, 0, "request failed: "+err.Error())
		return
	}
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // lets the connection be reused
	resp.Body.Close()
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		d.finish(ctx, log, c, outcomeDelivered, code, "", false)
	case code == http.StatusGone:
		d.finish(ctx, log, c, outcomeDisabled, code, "the endpoint answered 410 Gone: disabled for this chat", true)
	default:
		msg := resp.Status
		if len(excerpt) > 0 {
			msg += ": " + string(excerpt)
		}
		d.retryOrFail(ctx, log, c, code, msg)
	}
}

// markSent counts the request as sent by this replica before it is sent,
// and reports whether to send it. A claim counts nothing: counting at the
// request, a dispatcher that dies between its claim and its request (or a
// delivery failed without one) leaves no attempt the receiver never saw.
// A claim taken over meanwhile (its lease ran out) is not sent: another
// dispatcher sends it. When the count cannot be written, nothing is sent
// either; the claim falls due again at its lease's end.
func (d *Dispatcher) markSent(ctx context.Context, log *slog.Logger, c *chat.ClaimedDelivery) bool {
	err := d.cfg.Store.MarkDeliverySent(ctx, &chat.MarkDeliverySentParams{ChatID: c.ChatID, Seq: c.Seq, URL: c.URL,
		Attempts: c.Attempts, Owner: d.cfg.Owner, Now: d.cfg.Now()})
	switch {
	case err == nil:
		return true
	case errors.Is(err, chat.ErrFenced):
		d.metrics.attempts.WithLabelValues(outcomeTakenOver).Inc()
		log.Warn("webhook attempt not sent: its claim ran out and another dispatcher took it over", "outcome", outcomeTakenOver)
	case ctx.Err() != nil:
		log.Info("webhook attempt cut short by shutdown; it will be retried")
	default:
		d.metrics.errors.Inc()
		log.Error("record webhook attempt as sent; it will be retried after its lease", "err", err)
	}
	return false
}

// retryOrFail schedules the next attempt of a failed one, or fails the
// delivery when that attempt would fall after the retry window.
func (d *Dispatcher) retryOrFail(ctx context.Context, log *slog.Logger, c *chat.ClaimedDelivery, code int, msg string) {
	next := d.cfg.Now().Add(d.backoff(c.Attempts))
	if next.After(c.CreatedAt.Add(d.cfg.RetryFor)) {
		d.finishAt(ctx, log, c, outcomeFailed, code, msg+" (no retry: the retry window of "+d.cfg.RetryFor.String()+" is over)", false, next)
		return
	}
	d.finishAt(ctx, log, c, outcomeRetry, code, msg, false, next)
}

// backoff is the wait after the n-th failed attempt: FirstBackoff doubled
// n-1 times, at most MaxBackoff, drawn at random from its upper half so
// that receivers coming back from an outage are not hit by every retry at
// once.
func (d *Dispatcher) backoff(n int) time.Duration {
	b := d.cfg.FirstBackoff
	for i := 1; i < n && b < d.cfg.MaxBackoff; i++ {
		b *= 2
	}
	b = min(b, d.cfg.MaxBackoff)
	return b/2 + rand.N(b/2+1)
}

func (d *Dispatcher) finish(ctx context.Context, log *slog.Logger, c *chat.ClaimedDelivery, outcome string, code int, msg string, disable bool) {
	d.finishAt(ctx, log, c, outcome, code, msg, disable, d.cfg.Now())
}

// finishAt records an attempt's outcome, counts it and logs it.
func (d *Dispatcher) finishAt(ctx context.Context, log *slog.Logger, c *chat.ClaimedDelivery, outcome string, code int, msg string, disable bool, next time.Time) {
	status := chat.DeliveryFailed
	switch outcome {
	case outcomeDelivered:
		status = chat.DeliveryDelivered
	case outcomeRetry:
		status = chat.DeliveryPending
	}
	d.metrics.attempts.WithLabelValues(outcome).Inc()
	attrs := []any{"outcome", outcome}
	if code != 0 {
		attrs = append(attrs, "status_code", code)
	}
	switch outcome {
	case outcomeDelivered:
		log.Info("webhook delivered", attrs...)
	case outcomeRetry:
		log.Warn("webhook attempt failed; retrying", append(attrs, "error", msg, "next_attempt_at", next)...)
	default:
		log.Error("webhook delivery failed", append(attrs, "error", msg)...)
	}
	// Recorded even while shutting down: the outcome is known, and the
	// receiver should not see a delivered event again.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := d.cfg.Store.FinishDelivery(rctx, &chat.FinishDeliveryParams{ChatID: c.ChatID, Seq: c.Seq, URL: c.URL,
		Attempts: c.Attempts, Status: status, LastStatusCode: code, LastError: msg, NextAttemptAt: next, Now: d.cfg.Now(),
		DisableURL: disable})
	if err != nil {
		d.metrics.errors.Inc()
		log.Error("record webhook attempt; the delivery is tried again after its lease", "err", err)
	}
}

// redact drops a URL's query, which may hold a token, from log lines.
func redact(u string) string {
	for i := range len(u) {
		if u[i] == '?' {
			return u[:i] + "?…"
		}
	}
	return u
}
