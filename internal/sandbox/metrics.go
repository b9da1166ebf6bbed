package sandbox

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/metric"
)

// Outcomes of one execution, the values of the executions metric's outcome
// label.
const (
	outcomeOK      = "ok"      // exit code 0
	outcomeError   = "error"   // non-zero exit code, or the sandbox could not run the program
	outcomeTimeout = "timeout" // killed at its timeout (exit code 124)
	outcomeKilled  = "killed"  // killed by a signal, e.g. out of memory (exit code 128+n)
)

// metrics are the sandbox's Prometheus collectors.
type metrics struct {
	executions *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	alive      *prometheus.GaugeVec
}

// newMetrics creates the collectors and registers them on reg (when not
// nil). A collector that reg already has (a second Manager on the same
// registry, as in tests) is shared rather than an error; as in every package
// here, any other registration failure is returned.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		executions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentd_sandbox_executions_total",
			Help: "Programs run in sandboxes, by backend, language and outcome (ok, error, timeout, killed).",
		}, []string{"backend", "language", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "agentd_sandbox_execution_duration_seconds",
			Help:    "Wall time of one program in a sandbox, including sandbox overhead.",
			Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"backend", "language"}),
		alive: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "agentd_sandboxes_alive",
			Help: "Chat sandboxes (containers or work dirs) that exist now.",
		}, []string{"backend"}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.executions, err = metric.Register(reg, m.executions); err != nil {
		return nil, err
	}
	if m.duration, err = metric.Register(reg, m.duration); err != nil {
		return nil, err
	}
	if m.alive, err = metric.Register(reg, m.alive); err != nil {
		return nil, err
	}
	return m, nil
}

// observe records one execution: its outcome (a sandbox failure counts as
// an error) and its wall time.
func (m *metrics) observe(backend, language string, res *chat.ExecResult, err error, took time.Duration) {
	o := outcomeError
	if err == nil {
		o = outcome(res)
	}
	m.executions.WithLabelValues(backend, language, o).Inc()
	m.duration.WithLabelValues(backend, language).Observe(took.Seconds())
}
