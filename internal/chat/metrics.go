package chat

import (
	"context"
	"time"

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
	workers       prometheus.Gauge
	claimErrors   prometheus.Counter
	panics        prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, store Store) (*metrics, error) {
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
			Help: "Model call latency, retries included.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}, []string{"provider"}),
		workers:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentd_workers_active", Help: "Chats with a running worker on this replica."}),
		claimErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentd_claim_errors_total", Help: "Failed attempts to claim runnable chats or renew leases."}),
		panics:      prometheus.NewCounter(prometheus.CounterOpts{Name: "agentd_worker_panics_total", Help: "Workers that panicked; their chats failed with an internal error."}),
	}
	for _, c := range []prometheus.Collector{m.created, m.finished, m.turns, m.messages, m.events, m.appendErrors,
		m.appendSeconds, m.modelCalls, m.modelSeconds, m.workers, m.claimErrors, m.panics, &statusCollector{store: store}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) modelCall(provider string, err error, d time.Duration) {
	outcome := "ok"
	switch {
	case err != nil && (err == context.Canceled || err == context.DeadlineExceeded):
		outcome = "cancelled"
	case err != nil:
		outcome = "error"
	}
	m.modelCalls.WithLabelValues(provider, outcome).Inc()
	m.modelSeconds.WithLabelValues(provider).Observe(d.Seconds())
}

// statusCollector reports agentd_chats{status} from the store at scrape time:
// the store is the truth shared by all replicas, so every replica reports the
// same numbers and a restart loses nothing.
type statusCollector struct {
	store Store
}

var chatsDesc = prometheus.NewDesc("agentd_chats", "Chats in the store, by status.", []string{"status"}, nil)

func (s *statusCollector) Describe(ch chan<- *prometheus.Desc) { ch <- chatsDesc }

func (s *statusCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	counts, err := s.store.CountByStatus(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(chatsDesc, err)
		return
	}
	for _, st := range AllStatuses {
		ch <- prometheus.MustNewConstMetric(chatsDesc, prometheus.GaugeValue, float64(counts[st]), string(st))
	}
}
