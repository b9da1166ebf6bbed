package egress

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentd/agentd/internal/metric"
)

// metrics are the egress proxy's Prometheus collectors. No label carries a
// chat id or a host: the log has those, and labels must stay few.
type metrics struct {
	conns   *prometheus.CounterVec
	refused *prometheus.CounterVec
	bytes   *prometheus.CounterVec
	active  prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		conns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentd_sandbox_egress_connections_total",
			Help: "Connections sandboxes asked the egress proxy for, by outcome (allowed, refused, failed).",
		}, []string{"outcome"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentd_sandbox_egress_refused_total",
			Help: "Connections and requests the egress proxy refused or cut, by reason.",
		}, []string{"reason"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentd_sandbox_egress_bytes_total",
			Help: "Bytes sandboxes exchanged with remote hosts through the egress proxy, by direction (in, out).",
		}, []string{"direction"}),
		active: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentd_sandbox_egress_active_connections",
			Help: "Connections through the egress proxy open now.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	var err error
	if m.conns, err = metric.Register(reg, m.conns); err != nil {
		return nil, err
	}
	if m.refused, err = metric.Register(reg, m.refused); err != nil {
		return nil, err
	}
	if m.bytes, err = metric.Register(reg, m.bytes); err != nil {
		return nil, err
	}
	if m.active, err = metric.Register(reg, m.active); err != nil {
		return nil, err
	}
	return m, nil
}
