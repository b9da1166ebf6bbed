// Package tracing sets up OpenTelemetry tracing: the SDK's tracer provider
// with an OTLP/HTTP (protobuf) exporter. It is the only package that imports
// the SDK and the exporter; the others take a trace.TracerProvider (the otel
// API) and start their own spans.
//
// The exporter, sampler, batcher and resource read the standard OTEL_*
// variables themselves (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS,
// OTEL_TRACES_SAMPLER, OTEL_BSP_SCHEDULE_DELAY, OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES, …); whether tracing is on at all is the command's
// decision (Config.Enabled).
package tracing

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Config configures New.
type Config struct {
	// Enabled switches tracing on; off, New returns a provider whose spans
	// are never recorded, at the cost of a function call per span.
	Enabled bool
	// ServiceVersion is the service.version resource attribute.
	ServiceVersion string
}

// Provider is the tracer provider of the process.
type Provider struct {
	sdk *sdktrace.TracerProvider // nil when tracing is off
}

// New returns the process's tracer provider: exporting over OTLP/HTTP when
// cfg.Enabled, a no-op otherwise.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	if !cfg.Enabled {
		return &Provider{}, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	// Later resources win: the SDK's defaults, then ours (service.name
	// agentd), then OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME.
	res := resource.Default()
	for _, r := range []*resource.Resource{
		resource.NewSchemaless(attribute.String("service.name", "agentd"), attribute.String("service.version", cfg.ServiceVersion)),
		resource.Environment(),
	} {
		merged, err := resource.Merge(res, r)
		if err != nil && !errors.Is(err, resource.ErrSchemaURLConflict) {
			return nil, fmt.Errorf("trace resource: %w", err)
		}
		if merged != nil {
			res = merged
		}
	}
	return &Provider{sdk: sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))}, nil
}

// TracerProvider is what components start their spans with.
func (p *Provider) TracerProvider() trace.TracerProvider {
	if p == nil || p.sdk == nil {
		return noop.NewTracerProvider()
	}
	return p.sdk
}

// Enabled reports whether spans are exported.
func (p *Provider) Enabled() bool { return p != nil && p.sdk != nil }

// Shutdown exports the spans still buffered and stops the exporter. Call it
// after everything that makes spans has stopped.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil || p.sdk == nil {
		return nil
	}
	return p.sdk.Shutdown(ctx)
}
