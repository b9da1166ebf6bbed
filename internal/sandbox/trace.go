package sandbox

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentd/agentd/internal/chat"
)

// tracerName names this package's spans' instrumentation scope.
const tracerName = "github.com/agentd/agentd/internal/sandbox"

// tracedManager is a Manager whose executions are spans.
type tracedManager struct {
	Manager
	tracer trace.Tracer
}

// Exec runs the program in a span named sandbox.exec.
func (m *tracedManager) Exec(ctx context.Context, req *chat.ExecRequest) (*chat.ExecResult, error) {
	ctx, span := m.tracer.Start(ctx, "sandbox.exec", trace.WithAttributes(
		attribute.String("chat_id", req.ChatID), attribute.String("agentd.sandbox.backend", m.Backend()),
		attribute.String("agentd.sandbox.language", req.Language)))
	defer span.End()
	res, err := m.Manager.Exec(ctx, req)
	switch {
	case err != nil:
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	case res != nil:
		span.SetAttributes(attribute.Int("agentd.sandbox.exit_code", res.ExitCode))
	}
	return res, err
}
