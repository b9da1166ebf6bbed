package runtime

import (
	"context"
	"sync"
	"time"

	"github.com/agentd/agentd/internal/chat"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the runtime's Prometheus series, registered on an injected
// registerer so that several runtimes can live in one test process.
type metrics struct {
	created       prometheus.Counter
	finished      *prometheus.CounterVec
	turns         prometheus.Counter
	messages      prometheus.Counter
	events        *prometheus.CounterVec
	appendErrors  *prometheus.CounterVec
	appendSeconds prometheus.Histogram
	modelCalls    *prometheus.CounterVec
	modelSeconds  *prometheus.HistogramVec
	tokens        *prometheus.CounterVec
	workers       prometheus.Gauge
	claimErrors   prometheus.Counter
	panics        prometheus.Counter
	// runsPosted counts POST /runs by answer (queued, rejected: busy);
	// runs counts runs started by workers (a chat's first included).
	runsPosted *prometheus.CounterVec
	// keyed counts requests with an Idempotency-Key on a chat that were
	// answered from their key (repeated) or refused (conflict).
	keyed *prometheus.CounterVec
	runs  prometheus.Counter
	// deltasRelayed counts deltas relayed to and from other replicas
	// (direction sent, received); deltaRelayFailures those that could not
	// be sent.
	deltasRelayed      *prometheus.CounterVec
	deltaRelayFailures prometheus.Counter
	// structuredInvalid counts structured replies that did not validate
	// against their agent's output_schema (each fails its run).
	structuredInvalid prometheus.Counter
	// parallelBranches counts the branches of parallel steps (a graph's
	// nodes that run at once) whose work is under way.
	parallelBranches prometheus.Gauge
	// magenticFailed counts magentic_one orchestrator steps that failed
	// their run (a progress ledger it cannot use, a model call that failed).
	magenticFailed prometheus.Counter
	// contextRefused counts changes of the context variables a function
	// made that their limits refused (the call's result says why).
	contextRefused prometheus.Counter
}

// modelBuckets are the model latency buckets (seconds): from a fast local
// model to the default per-call timeout of 120 s, so that slow calls still
// land in a bucket of their own instead of all in +Inf.
var modelBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 45, 60, 90, 120}

// DefaultStatusCountsTTL is how long agentd_chats counts are reused between
// scrapes.
const DefaultStatusCountsTTL = 15 * time.Second

func newMetrics(reg prometheus.Registerer, store chat.Store, statusTTL time.Duration, now func() time.Time) (*metrics, error) {
	m := &metrics{
		created: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentd_chats_created_total", Help: "Chats created (idempotent repeats excluded)."}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_chats_finished_total",
			Help: "Chats that reached a terminal status on this replica, by status and stop reason."}, []string{"status", "stop_reason"}),
		turns:    prometheus.NewCounter(prometheus.CounterOpts{Name: "agentd_turns_total", Help: "Agent turns completed."}),
		messages: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentd_messages_appended_total", Help: "Messages appended to chat logs by workers."}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_events_appended_total",
			Help: "Events appended to chat logs by workers, by type."}, []string{"type"}),
		appendErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_append_errors_total",
			Help: "Failed log appends, by reason (fenced: another worker owns the chat)."}, []string{"reason"}),
		appendSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "agentd_append_duration_seconds",
			Help: "Time for one durable append, including group-commit wait.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		modelCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_model_calls_total",
			Help: "Model calls, by provider and outcome (ok, error, cancelled)."}, []string{"provider", "outcome"}),
		modelSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agentd_model_call_duration_seconds",
			Help: "Model call latency, retries included.", Buckets: modelBuckets}, []string{"provider"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_tokens_total",
			Help: "Tokens the models reported using, by kind (prompt, completion); speaker selection included."}, []string{"kind"}),
		workers:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentd_workers_active", Help: "Chats with a running worker on this replica."}),
		claimErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentd_claim_errors_total", Help: "Failed attempts to claim runnable chats or renew leases."}),
		panics:      prometheus.NewCounter(prometheus.CounterOpts{Name: "agentd_worker_panics_total", Help: "Workers that panicked; their chats failed with an internal error."}),
		runsPosted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_runs_posted_total",
			Help: "Runs posted to chats, by if_busy and outcome (queued, busy: rejected because a run was active)."}, []string{"if_busy", "outcome"}),
		keyed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_keyed_requests_total",
			Help: "Requests on a chat (runs, fork, stop, input) whose Idempotency-Key was answered before, by op and outcome (repeated: given the first answer; conflict: the key answered another request, 409)."}, []string{"op", "outcome"}),
		runs: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentd_runs_started_total",
			Help: "Runs after a chat's first that workers started (POST /runs, POST /fork with a run)."}),
		deltasRelayed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_deltas_relayed_total",
			Help: "Deltas of streamed replies relayed between replicas, by direction (sent: of chats this replica runs, to replicas whose streams follow them; received)."}, []string{"direction"}),
		deltaRelayFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentd_delta_relay_failures_total",
			Help: "Deltas that could not be relayed to the other replicas: their streams get those replies as whole messages only."}),
		structuredInvalid: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentd_structured_replies_invalid_total",
			Help: "Model replies that did not validate against their agent's output_schema; each fails its run, as in AgentChat."}),
		parallelBranches: prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentd_parallel_branches_active",
			Help: "Steps of parallel branches (a graph's nodes that run at once) under way on this replica."}),
	}
	for _, c := range []prometheus.Collector{m.created, m.finished, m.turns, m.messages, m.events, m.appendErrors,
		m.appendSeconds, m.modelCalls, m.modelSeconds, m.tokens, m.workers, m.claimErrors, m.panics, m.runsPosted, m.keyed, m.runs,
		m.deltasRelayed, m.deltaRelayFailures, m.structuredInvalid, m.parallelBranches, &statusCollector{store: store, ttl: statusTTL, now: now}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.magenticFailed = prometheus.NewCounter(prometheus.CounterOpts{Name: "agentd_magentic_steps_failed_total",
		Help: "magentic_one orchestrator steps that failed their run: a progress ledger AgentChat would not accept, or a failed model call."})
	if err := reg.Register(m.magenticFailed); err != nil {
		return nil, err
	}
	m.contextRefused = prometheus.NewCounter(prometheus.CounterOpts{Name: "agentd_context_changes_refused_total",
		Help: "Changes of a chat's context variables made by a python_function that their limits refused (size, depth, names)."})
	if err := reg.Register(m.contextRefused); err != nil {
		return nil, err
	}
	return m, nil
}

// modelCall records one model call: its outcome, its latency and the tokens
// it used (resp is nil when it failed).
func (m *metrics) modelCall(provider string, resp *chat.ModelResponse, err error, d time.Duration) {
	outcome := "ok"
	switch {
	case err != nil && (err == context.Canceled || err == context.DeadlineExceeded):
		outcome = "cancelled"
	case err != nil:
		outcome = "error"
	}
	m.modelCalls.WithLabelValues(provider, outcome).Inc()
	m.modelSeconds.WithLabelValues(provider).Observe(d.Seconds())
	if resp != nil {
		m.tokens.WithLabelValues("prompt").Add(float64(resp.Usage.PromptTokens))
		m.tokens.WithLabelValues("completion").Add(float64(resp.Usage.CompletionTokens))
	}
}

// statusCollector reports agentd_chats{status} from the store: the store is
// the truth shared by all replicas, so every replica reports the same numbers
// and a restart loses nothing. Counting means a GROUP BY over every chat, so
// the counts are cached for ttl: however many scrapers ask, a replica runs
// at most one count per ttl, and concurrent scrapes share it. Counts kept
// incrementally in memory would be cheaper but wrong: a chat created on one
// replica finishes on another, and a restart would start from zero.
type statusCollector struct {
	store chat.Store
	ttl   time.Duration
	now   func() time.Time

	mu     sync.Mutex
	at     time.Time
	counts map[chat.Status]int64
}

var chatsDesc = prometheus.NewDesc("agentd_chats", "Chats in the store, by status (refreshed at most every 15 s by default).", []string{"status"}, nil)

func (s *statusCollector) Describe(ch chan<- *prometheus.Desc) { ch <- chatsDesc }

func (s *statusCollector) Collect(ch chan<- prometheus.Metric) {
	counts, err := s.get()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(chatsDesc, err)
		return
	}
	for _, st := range chat.AllStatuses {
		ch <- prometheus.MustNewConstMetric(chatsDesc, prometheus.GaugeValue, float64(counts[st]), string(st))
	}
}

// get returns the cached counts, refreshing them when older than ttl. The
// lock is held during the query so that scrapes arriving together run one.
func (s *statusCollector) get() (map[chat.Status]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts != nil && s.now().Sub(s.at) < s.ttl {
		return s.counts, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts, err := s.store.CountByStatus(ctx)
	if err != nil {
		return nil, err
	}
	s.counts, s.at = counts, s.now()
	return counts, nil
}

// appMetrics are the series of these features.
type appMetrics struct {
	erased  *prometheus.CounterVec
	patched prometheus.Counter
	// contextPatches counts PATCHes of context variables by outcome.
	contextPatches *prometheus.CounterVec
	teams          prometheus.Counter
	errors         *prometheus.CounterVec
}

func newAppMetrics(reg prometheus.Registerer) (*appMetrics, error) {
	m := &appMetrics{
		erased: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_chats_erased_total",
			Help: "Chats erased, by cause (request: DELETE /v1/chats/{id}; retention: AGENTD_RETENTION)."}, []string{"cause"}),
		patched: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentd_chat_metadata_patches_total",
			Help: "Metadata changes (PATCH /v1/chats/{id})."}),
		contextPatches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_context_patches_total",
			Help: "Changes of context variables between runs (PATCH /v1/chats/{id}), by outcome (applied, busy: a run is active, invalid)."}, []string{"outcome"}),
		teams: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentd_team_versions_created_total",
			Help: "Saved team versions created."}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_retention_errors_total",
			Help: "Retention passes that failed (the next pass tries again)."}, []string{"stage"}),
	}
	for _, c := range []prometheus.Collector{m.erased, m.patched, m.contextPatches, m.teams, m.errors} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.erased.WithLabelValues("request")
	m.erased.WithLabelValues("retention")
	m.errors.WithLabelValues("erase")
	return m, nil
}
