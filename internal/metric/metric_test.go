package metric_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/agentd/agentd/internal/metric"
)

func counter(help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_test_total", Help: help}, labels)
}

// TestRegisterSharesACollectorOfTheSameDescription: a second instance of a
// component counts into the first one's series; a collector that only
// shares the name is an error, as Prometheus says.
func TestRegisterSharesACollectorOfTheSameDescription(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	first, err := metric.Register(reg, counter("Things.", "kind"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := metric.Register(reg, counter("Things.", "kind"))
	if err != nil {
		t.Fatalf("second registration of the same collector: %v", err)
	}
	if second != first {
		t.Fatal("the second registration did not return the registered collector")
	}
	second.WithLabelValues("a").Inc()
	first.WithLabelValues("a").Inc()
	if got := testutil.ToFloat64(first.WithLabelValues("a")); got != 2 {
		t.Fatalf("shared counter = %v, want 2", got)
	}

	for name, c := range map[string]prometheus.Collector{
		"other labels": counter("Things.", "other"),
		"other help":   counter("Other things.", "kind"),
	} {
		if _, err := metric.Register(reg, c); err == nil {
			t.Errorf("%s: registered", name)
		}
	}
	// The same description held by a collector of another type.
	gauge := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "agentd_test_total", Help: "Things."}, []string{"kind"})
	if _, err := metric.Register(reg, gauge); err == nil {
		t.Error("a gauge registered over a counter of the same description")
	}
}
