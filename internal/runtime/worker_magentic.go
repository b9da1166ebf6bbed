package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/chat/engine"

	"github.com/agentd/agentd/internal/spec"
)

// magenticStep does a step of the magentic_one orchestrator: its model
// calls (see state.magenticEvents), then one append of what they made.
func (w *worker) magenticStep(ctx context.Context, st engine.Step) error {
	cfg := w.spec.ResolveModel(w.spec.SpeakerSelection.Model)
	evs, err := w.st.MagenticEvents(st, func(msgs []chat.ModelMessage, ledger bool, index int) (*chat.ModelResponse, error) {
		c := cfg
		if ledger {
			c.ResponseFormat = json.RawMessage(engine.MagenticLedgerFormat)
		}
		req := &chat.ModelRequest{ChatID: w.id, Caller: spec.MagenticOrchestrator, Config: c, CallIndex: index, Messages: msgs}
		start := time.Now()
		resp, err := w.rt.models.Complete(ctx, req)
		w.rt.metrics.modelCall(cfg.Provider, resp, err, time.Since(start))
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("the magentic_one orchestrator's model (%s): %w", cfg.Provider, err)
		}
		return resp, nil
	})
	if err != nil {
		if ctx.Err() == nil {
			w.rt.metrics.magenticFailed.Inc()
			w.log().Warn("magentic_one orchestrator step failed", "step", st.Magentic, "err", err)
		}
		return err
	}
	return w.commit(ctx, evs...)
}
