package tool

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentd/agentd/internal/metric"
)

// metrics are the runner's Prometheus collectors.
type metrics struct {
	calls   *prometheus.CounterVec
	seconds *prometheus.HistogramVec
}

// newMetrics registers the collectors on reg (if any). Collectors already
// registered (a second Runner on the same registry) are shared.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentd_tool_calls_total",
			Help: "Tool calls, by implementation type and outcome (ok, tool_error, invalid_arguments, timeout, refused, failed, cancelled).",
		}, []string{"type", "outcome"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentd_tool_call_duration_seconds",
			Help:    "Tool call latency, by implementation type.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}, []string{"type"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.calls, err = metric.Register(reg, m.calls); err != nil {
		return nil, err
	}
	if m.seconds, err = metric.Register(reg, m.seconds); err != nil {
		return nil, err
	}
	return m, nil
}

// observe counts one call.
func (m *metrics) observe(typ, outcome string, d time.Duration) {
	m.calls.WithLabelValues(typ, outcome).Inc()
	m.seconds.WithLabelValues(typ).Observe(d.Seconds())
}
