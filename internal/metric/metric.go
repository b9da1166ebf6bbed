// Package metric registers Prometheus collectors that several instances of
// one component share.
//
// Every component takes its prometheus.Registerer from its caller (no
// global registry), and some are made more than once on one registry: a
// server's sandbox Manager and tool Runner are, and tests make two servers
// in one process. Register lets each instance after the first use the
// collector the first one registered, so that the instances count into one
// series rather than fail.
package metric

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on reg and returns it, or returns the collector of
// the same description that reg already has. Any other failure (a
// collector of the same name with other labels or help, or of another
// type) is returned; Prometheus' error names the metric.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, fmt.Errorf("register metrics: %w", err)
}
