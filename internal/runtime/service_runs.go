package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/chat/engine"

	"github.com/google/uuid"

	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/spec/problem"
)

// This file is the service API of runs (docs/runs.md): posting the next
// run, stopping the active one after its turn, forking a chat, and the
// approvals a paused turn waits for.

// ErrLogBroken is returned for a chat whose log cannot be folded: it takes
// no new run (the HTTP layer answers 409).
var ErrLogBroken = errors.New("the chat's log cannot be read, so it cannot be run again")

// brokenLogPrefix starts the error of a chat failed for a log that does
// not fold (see state.next).
const brokenLogPrefix = "the chat's log cannot be read"

// RunOfKey returns the run that a keyed SubmitRun of chat id posted, as
// that post left the chat, whatever request it was (nil, 0, nil for a key
// that posted none): a front-end whose client names a run by its id alone
// finds the run again when the client posts it with what it holds now.
func (r *Runtime) RunOfKey(ctx context.Context, tenant, id, key string) (*chat.Chat, int, error) {
	c, err := r.store.GetChat(ctx, tenant, id)
	if err != nil {
		return nil, 0, err
	}
	a, err := r.answered(ctx, &chat.KeyedRequest{Tenant: tenant, ChatID: id, Op: chat.OpRun, Key: key, AnyRequest: true})
	if a == nil || err != nil {
		return nil, 0, err
	}
	return replayed(a, c.Spec), a.Run, nil
}

// SubmitRun posts the next run of a chat (POST /v1/chats/{id}/runs) and
// returns the chat afterwards and the run's number. A busy chat answers as
// the request's if_busy says: a *BusyError for reject. With a key
// (Idempotency-Key), a repeat of the request gets the first answer. req
// comes from spec.DecodeRunRequest: its task is checked here against the
// chat's agents, and the problems its decoding found are reported with
// those.
func (r *Runtime) SubmitRun(ctx context.Context, tenant, id, key string, req *spec.RunRequest) (*chat.Chat, int, error) {
	c, err := r.store.GetChat(ctx, tenant, id)
	if err != nil {
		return nil, 0, err
	}
	k := keyedRequest(tenant, id, chat.OpRun, key, req.Body)
	if a, err := r.answered(ctx, k); a != nil || err != nil {
		if err != nil {
			return nil, 0, err
		}
		return replayed(a, c.Spec), a.Run, nil
	}
	sp, err := r.specs.decode(c.Spec)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: decode stored spec: %v", ErrLogBroken, err)
	}
	queued, probs := engine.CheckRun(req, sp, r.limits)
	if len(probs) > 0 {
		return nil, 0, &spec.ValidationError{Problems: probs}
	}
	if len(queued.ContextVariables) > 0 {
		// Checked against the variables now, for a clear answer; a run
		// queued behind others is checked again as it starts.
		if err := r.checkContextChange(ctx, c, queued.ContextVariables, chat.ContextByRun); err != nil {
			return nil, 0, err
		}
	}
	if c.Status == chat.StatusFailed && strings.HasPrefix(c.Error, brokenLogPrefix) {
		return nil, 0, ErrLogBroken
	}
	sc, n, err := r.store.SubmitRun(ctx, &chat.SubmitRunParams{Tenant: tenant, ChatID: id, Request: chat.MustJSON(queued),
		IfBusy: req.IfBusy, Key: uuid.NewString(), Now: r.now(), Keyed: k})
	var busy *chat.BusyError
	switch {
	case errors.As(err, &busy):
		r.metrics.runsPosted.WithLabelValues(req.IfBusy, "busy").Inc()
		return nil, 0, err
	case err != nil:
		a, err := r.repeated(ctx, k, err)
		if err != nil {
			return nil, 0, err
		}
		return replayed(a, c.Spec), a.Run, nil
	}
	r.metrics.runsPosted.WithLabelValues(req.IfBusy, "queued").Inc()
	r.parents.remember(ctx, id, r.now())
	r.log.Info("run posted", "chat_id", id, "run", n, "if_busy", req.IfBusy, "queued_runs", sc.QueuedRuns, "keyed", k != nil)
	if sc.CancelRequested {
		r.sched.cancel(id, errCancelRequested) // the interrupted run, if it runs here
	}
	r.sched.runQueued(id)
	return sc, n, nil
}

// StopRun asks a chat's active run to end after its current turn (POST
// /stop, AgentChat's ExternalTermination). changed is false when no run
// was active. With a key, a repeat gets the first answer.
func (r *Runtime) StopRun(ctx context.Context, tenant, id, key string) (*chat.Chat, bool, error) {
	k := keyedRequest(tenant, id, chat.OpStop, key, nil)
	a, err := r.answered(ctx, k)
	if err != nil {
		return nil, false, err
	}
	var c *chat.Chat
	if a == nil {
		c, err = r.store.RequestStop(ctx, tenant, id, k)
		if err != nil {
			if a, err = r.repeated(ctx, k, err); err != nil {
				return nil, false, err
			}
		}
	}
	if a != nil {
		cur, err := r.store.GetChat(ctx, tenant, id)
		if err != nil {
			return nil, false, err
		}
		c = replayed(a, cur.Spec)
		return c, !c.Status.Terminal(), nil
	}
	if c.Status.Terminal() {
		return c, false, nil
	}
	r.log.Info("stop requested", "chat_id", id, "run", c.Run)
	r.sched.stopRequested(id)
	return c, true, nil
}

// Fork creates a chat whose log starts as a copy of another's up to a
// turn's or a run's end (POST /fork): a new chat of the same tenant and
// spec, in the state that copy leaves it, with forked_from set. A run in
// the request starts on it at once (it interrupts a run the copy left in
// progress). It is how a client edits history or tries another path.
// With a key, a repeat gets the first fork. req comes from
// spec.DecodeForkRequest.
func (r *Runtime) Fork(ctx context.Context, tenant, id, key string, req *spec.ForkRequest) (*chat.Chat, error) {
	if len(req.Problems) > 0 {
		return nil, &spec.ValidationError{Problems: req.Problems}
	}
	src, err := r.store.GetChat(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	k := keyedRequest(tenant, id, chat.OpFork, key, req.Body)
	if a, err := r.answered(ctx, k); a != nil || err != nil {
		if err != nil {
			return nil, err
		}
		// The variables as of the fork's seq then, as the first answer showed them.
		return r.withContext(ctx, replayed(a, src.Spec))
	}
	sp, err := r.specs.decode(src.Spec)
	if err != nil {
		return nil, fmt.Errorf("%w: decode stored spec: %v", ErrLogBroken, err)
	}
	at := src.LastSeq
	if req.AtSeq != nil {
		at = *req.AtSeq
	}
	var probs problem.List
	if at < 1 || at > src.LastSeq {
		probs.Add("/at_seq", "must be a seq of the chat's log: 1 to %d", src.LastSeq)
	}
	var run *engine.QueuedRequest
	if req.Run != nil {
		// Its if_busy does not apply: the fork's run starts at once.
		q, rp := engine.CheckRun(req.Run, sp, r.limits)
		probs.AddAll("/run", rp)
		run = q
	}
	if probs.Len() > 0 {
		return nil, &spec.ValidationError{Problems: probs.Items()}
	}
	evs, st, err := r.foldPrefix(ctx, id, sp, at)
	if err != nil {
		return nil, err
	}
	if msg := forkPointProblem(st, at); msg != "" {
		return nil, &spec.ValidationError{Problems: []spec.Problem{{Path: "/at_seq", Message: msg}}}
	}
	var change *chat.ContextUpdate
	if len(req.ContextVariables) > 0 {
		u := chat.ContextUpdateOf(req.ContextVariables, chat.ContextBy{Client: chat.ContextByFork})
		if msg := engine.ContextTooLarge(st.ContextVariables(), u); msg != "" {
			return nil, &spec.ValidationError{Problems: []spec.Problem{{Path: "/context_variables", Message: msg}}}
		}
		change = &u
	}
	fid, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("new chat id: %w", err)
	}
	now := r.now()
	if change != nil {
		// The fork's own change comes right after the copy (before a run
		// the request starts, whose own variables merge after it).
		if err := appendFolded(st, &evs, now, chat.Storable(chat.ContextEvent(*change))); err != nil {
			return nil, fmt.Errorf("%w: change the fork's variables: %v", ErrLogBroken, err)
		}
	}
	if run != nil {
		// The fork's own run starts in the fork's log as it is written,
		// so the fork answers running at that run, and nothing can take
		// a turn of the copied run first. A run the copy leaves in
		// progress (or waiting for a human) is cut where it was forked,
		// as an interrupt would end it.
		if !st.Status.Terminal() {
			if err := appendFolded(st, &evs, now, engine.ForkCutEvent(st.Run)); err != nil {
				return nil, fmt.Errorf("%w: end the copied run: %v", ErrLogBroken, err)
			}
		}
		if err := appendFolded(st, &evs, now, st.RunStartEvents(st.Run+1, *run)...); err != nil {
			return nil, fmt.Errorf("%w: start the fork's run: %v", ErrLogBroken, err)
		}
	}
	upd := st.Update(now)
	for i := range evs {
		evs[i].ChatID = ""
	}
	c, _, err := r.store.CreateChat(ctx, &chat.CreateChatParams{ID: fid.String(), Tenant: tenant, Name: src.Name, Spec: src.Spec,
		Metadata: src.Metadata, CreatedAt: now, Events: evs, State: &upd, ForkedFrom: &chat.ForkRef{ChatID: src.ID, Seq: at}, Team: src.Team,
		Keyed: k})
	if err != nil {
		a, err := r.repeated(ctx, k, err)
		if err != nil {
			return nil, err
		}
		// The variables as of the fork's seq then, as the first answer showed them.
		return r.withContext(ctx, replayed(a, src.Spec))
	}
	c.ContextVariables = engine.EncodeContext(st.ContextVariables())
	r.metrics.created.Inc()
	if run != nil {
		// Counted as the interrupt it is of a run the copy left going.
		r.metrics.runsPosted.WithLabelValues(chat.IfBusyInterrupt, "queued").Inc()
	}
	r.parents.remember(ctx, c.ID, now)
	r.log.Info("chat forked", "chat_id", c.ID, "forked_from", src.ID, "at_seq", at, "status", c.Status, "run", c.Run)
	if !c.Status.Terminal() && c.Status != chat.StatusAwaitingInput {
		r.sched.kick() // its run, copied or its own, goes on
	}
	return c, nil
}

// appendFolded folds events made for a chat's log after its last event
// and adds them to evs, numbered and dated.
func appendFolded(st *engine.State, evs *[]chat.Event, now time.Time, made ...chat.Event) error {
	for _, e := range made {
		e.Seq, e.CreatedAt = st.LastSeq+1, now
		if err := st.Apply(e); err != nil {
			return err
		}
		*evs = append(*evs, e)
	}
	return nil
}

// foldPrefix reads a chat's log up to seq at and folds it.
func (r *Runtime) foldPrefix(ctx context.Context, id string, sp *spec.Spec, at int64) ([]chat.Event, *engine.State, error) {
	st := engine.NewState(sp, min(engine.DerefOr(sp.MaxRound, sp.DefaultMaxRound()), r.limits.MaxRound))
	var evs []chat.Event
	for st.LastSeq < at {
		page, err := r.store.ListEvents(ctx, &chat.ListEventsParams{ChatID: id, After: st.LastSeq, Limit: int(min(at-st.LastSeq, 1000))})
		if err != nil {
			return nil, nil, fmt.Errorf("read log of chat %s: %w", id, err)
		}
		if len(page) == 0 {
			return nil, nil, fmt.Errorf("read log of chat %s: it ends at seq %d, before %d", id, st.LastSeq, at)
		}
		for _, e := range page {
			if err := st.Apply(e); err != nil {
				return nil, nil, fmt.Errorf("%w: %v", ErrLogBroken, err)
			}
		}
		evs = append(evs, page...)
	}
	return evs, st, nil
}

// forkPointProblem says why a log cut at seq at is not a place to fork
// from, or "": a fork starts at a turn's or a run's end, never inside an
// agent's turn.
func forkPointProblem(st *engine.State, at int64) string {
	if st.Pending != nil && !st.Status.Terminal() {
		return fmt.Sprintf("seq %d is inside the turn of %s (turn %d): fork at a turn's or a run's end", at, st.Pending.Agent, st.Pending.Turn)
	}
	return ""
}

// checkApprovals checks a client's decisions on a pending approval
// request: one per call held (an edit valid against the tool's schema), or
// one for the code.
func (r *Runtime) checkApprovals(ctx context.Context, c *chat.Chat, p *chat.PendingInput, in *chat.Input) []spec.Problem {
	var probs problem.List
	add := probs.Add
	if in.Content != nil || in.Parts != nil {
		add("/content", "this request asks for approvals, not a message")
	}
	if in.Speaker != nil {
		add("/speaker", "this request asks for approvals, not a speaker")
	}
	if len(in.Approvals) == 0 {
		add("/approvals", "this request asks for a decision on each held call or on the code: [{\"tool_call_id\"?, \"approve\", \"arguments\"?, \"reason\"?}]")
		return probs.Items()
	}
	for i, a := range in.Approvals {
		if len(a.Reason) > r.limits.MaxPromptBytes || strings.IndexByte(a.Reason, 0) >= 0 {
			add("/approvals/"+strconv.Itoa(i)+"/reason", "must be at most %d bytes, without NUL", r.limits.MaxPromptBytes)
		}
	}
	if len(p.CodeBlocks) > 0 {
		if len(in.Approvals) != 1 || in.Approvals[0].ToolCallID != "" || len(in.Approvals[0].Arguments) > 0 {
			add("/approvals", "the code is approved or rejected as a whole: one decision without tool_call_id or arguments")
		}
		return probs.Items()
	}
	held := map[string]chat.ToolCall{}
	for _, tc := range p.ToolCalls {
		held[tc.ID] = tc
	}
	seen := map[string]bool{}
	for i, a := range in.Approvals {
		path := "/approvals/" + strconv.Itoa(i)
		tc, ok := held[a.ToolCallID]
		switch {
		case !ok:
			add(path+"/tool_call_id", "names no held call: one of %s", engine.PyList(callIDs(p.ToolCalls)))
			continue
		case seen[a.ToolCallID]:
			add(path+"/tool_call_id", "decides %q a second time", a.ToolCallID)
			continue
		}
		seen[a.ToolCallID] = true
		if len(a.Arguments) > 0 {
			if !a.Approve {
				add(path+"/arguments", "a rejected call runs with no arguments")
			} else if msg := r.checkEditedArguments(ctx, c, p.Agent, tc, a.Arguments); msg != "" {
				add(path+"/arguments", "%s", msg)
			}
		}
	}
	for _, tc := range p.ToolCalls {
		if !seen[tc.ID] {
			add("/approvals", "no decision for call %q (%s)", tc.ID, tc.Function.Name)
		}
	}
	return probs.Items()
}

// checkEditedArguments checks edited arguments against the schema of the
// function the call names, among the agent's tools.
func (r *Runtime) checkEditedArguments(ctx context.Context, c *chat.Chat, agent string, tc chat.ToolCall, args json.RawMessage) string {
	if r.tools == nil {
		return "this server runs no tools"
	}
	sp, err := r.specs.decode(c.Spec)
	if err != nil {
		return "the chat's spec cannot be read"
	}
	a := sp.Agent(agent)
	if a == nil {
		return "the call's agent is not in the chat"
	}
	for _, name := range a.Tools {
		t := sp.Tool(name)
		defs, err := r.tools.Describe(ctx, c.ID, t)
		if err != nil {
			return fmt.Sprintf("the tool %s cannot be described now: %v", name, err)
		}
		for _, d := range defs {
			if d.Name == tc.Function.Name {
				return r.tools.CheckArguments(t, d, string(args))
			}
		}
	}
	return fmt.Sprintf("%s is not a tool of %s", tc.Function.Name, agent)
}

func callIDs(calls []chat.ToolCall) []string {
	ids := make([]string, len(calls))
	for i, c := range calls {
		ids[i] = c.ID
	}
	return ids
}
