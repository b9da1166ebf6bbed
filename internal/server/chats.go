package server

import (
	"bytes"
	"context"
	"net/http"
	"time"

	"github.com/agentd/agentd/internal/api"
	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/spec"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentd/agentd/internal/chat"
)

// List limits (GET /v1/chats and GET /v1/chats/{id}/messages).
const (
	defaultChatLimit    = 50
	defaultMessageLimit = 100
	maxListLimit        = 1000
)

// chatsResource serves /v1/chats and everything below it.
type chatsResource struct {
	responder
	cfg     Config
	chats   Chats
	metrics *httpMetrics
}

// waiting marks a request that waits on purpose (a long poll or an SSE
// stream) and counts it in gauge while it waits; call the returned function
// when the wait is over.
func (c *chatsResource) waiting(r *http.Request, gauge prometheus.Gauge) func() {
	markLongLived(r.Context())
	gauge.Inc()
	return gauge.Dec
}

// Routes returns the router of the chats resource, to be mounted at /v1/chats
// behind authentication (handlers read the tenant from the context).
func (c *chatsResource) Routes() chi.Router {
	r := chi.NewRouter()
	r.Post("/", c.create)
	r.Get("/", c.list)
	r.Get("/{id}", c.get)
	r.Patch("/{id}", c.patch)
	r.Delete("/{id}", c.erase)
	r.Get("/{id}/deliveries", c.deliveries)
	r.Get("/{id}/messages", c.messages)
	r.Get("/{id}/events", c.events)
	r.Post("/{id}/input", c.input)
	r.Post("/{id}/cancel", c.cancel)
	r.Post("/{id}/runs", c.runs)
	r.Post("/{id}/stop", c.stop)
	r.Post("/{id}/fork", c.fork)
	r.Get("/{id}/team", c.team)
	return r
}

// create handles POST /v1/chats; with dry_run=true it validates the
// request as a create does and answers the spec, creating nothing.
func (c *chatsResource) create(w http.ResponseWriter, r *http.Request) {
	q := newQueryParser(r)
	wait := q.wait(c.cfg.MaxWait)
	withSpec := q.includeSpec()
	dryRun := q.bool("dry_run")
	if dryRun && wait > 0 {
		q.problem("wait_s", "a dry run creates no chat to wait for")
	}
	if err := q.err(); err != nil {
		c.writeError(w, r, err)
		return
	}
	key, err := idempotencyKey(r)
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	body, err := readBody(w, r, c.cfg.MaxBodyBytes)
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	// Only well-formedness is checked here; the runtime decodes the spec
	// strictly and reports every problem of it as a *spec.ValidationError.
	if err := checkOneJSONValue(body); err != nil {
		c.writeError(w, r, err)
		return
	}
	// A team component ({"task", "team"}) becomes the spec it stands for.
	body, form, err := parseTeamForm(body, c.cfg.ModelEndpoints)
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	if dryRun {
		// Nothing is created and no Idempotency-Key is recorded: the
		// answer is what a create would have run, or its 422.
		checked, err := c.chats.CheckCreate(r.Context(), Tenant(r.Context()), body)
		if err != nil {
			c.writeError(w, r, form.mapError(err))
			return
		}
		c.writeJSON(w, r, http.StatusOK, newDryRunResponse(checked, form.warnings()))
		return
	}
	ch, created, err := c.chats.Create(r.Context(), &chat.CreateParams{
		Tenant: Tenant(r.Context()), Body: body, IdempotencyKey: key,
	})
	if err != nil {
		c.writeError(w, r, form.mapError(err))
		return
	}
	noteChat(r.Context(), ch.ID)
	if wait > 0 {
		extendWriteDeadline(w, wait)
		done := c.waiting(r, c.metrics.pollsOpen)
		ch, err = c.waitTerminal(r.Context(), ch, wait)
		done()
		if err != nil {
			c.writeError(w, r, err)
			return
		}
	}
	resp, err := form.response(ch, withSpec)
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", "/v1/chats/"+ch.ID)
	}
	c.writeJSON(w, r, status, resp)
}

// waitTerminal waits until the chat is settled (see settled) or wait has
// passed, and returns the chat as it stands then.
func (c *chatsResource) waitTerminal(ctx context.Context, ch *chat.Chat, wait time.Duration) (*chat.Chat, error) {
	if settled(ch) {
		return ch, nil
	}
	tenant := Tenant(ctx)
	// Start from where this replica's worker has the chat, if it runs it;
	// else read after subscribing: a commit between the caller's read and
	// the subscription would otherwise never wake us. Then only the
	// progress is read, when a wake-up did not bring it (see runtime.Wake),
	// and the whole chat once at the end, unless the wake-up of the append
	// that ended it brought that too.
	wk, signal, unsubscribe := c.chats.Follow(ch.ID)
	defer unsubscribe()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var err error
	if !wk.Known {
		wk.Progress, err = c.chats.Progress(ctx, tenant, ch.ID)
	}
	for {
		if err != nil {
			return nil, err
		}
		if settledProgress(wk.Progress) {
			if ended, ok := wk.Ended(ch); ok {
				return ended, nil
			}
			return c.chats.Get(ctx, tenant, ch.ID)
		}
		select {
		case next, ok := <-signal:
			if !ok {
				// The runtime ended the subscription (shutting down): no
				// more wake-ups will come, so wait out the time only.
				signal = nil
			}
			if next.Known && next.Progress.LastSeq >= wk.Progress.LastSeq {
				wk = next
			} else if ok {
				wk = runtime.Wake{}
				wk.Progress, err = c.chats.Progress(ctx, tenant, ch.ID)
			}
		case <-timer.C:
			return c.chats.Get(ctx, tenant, ch.ID)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// list handles GET /v1/chats.
func (c *chatsResource) list(w http.ResponseWriter, r *http.Request) {
	q := newQueryParser(r)
	status := chat.Status(q.q.Get("status"))
	if status != "" && !status.Valid() {
		q.problem("status", "must be one of queued, running, awaiting_input, completed, failed, cancelled")
	}
	limit := q.int("limit", defaultChatLimit, 1, maxListLimit)
	withSpec := q.includeSpec()
	p := &chat.ListChatsParams{Tenant: Tenant(r.Context()), Status: status, Limit: int(limit), Cursor: q.q.Get("cursor")}
	listFilters(q, p)
	if err := q.err(); err != nil {
		c.writeError(w, r, err)
		return
	}
	chats, next, err := c.chats.List(r.Context(), p)
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	resp := api.ChatList{Chats: make([]api.Chat, len(chats)), NextCursor: nullable(next)}
	for i, ch := range chats {
		if resp.Chats[i], err = newChatResponse(ch, withSpec); err != nil {
			c.writeError(w, r, err)
			return
		}
	}
	c.writeJSON(w, r, http.StatusOK, resp)
}

// get handles GET /v1/chats/{id}.
func (c *chatsResource) get(w http.ResponseWriter, r *http.Request) {
	id, withSpec, ok := c.chatParams(w, r)
	if !ok {
		return
	}
	ch, err := c.chats.Get(r.Context(), Tenant(r.Context()), id)
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	c.writeChat(w, r, http.StatusOK, ch, withSpec)
}

// input handles POST /v1/chats/{id}/input: 202 with the chat, since the
// worker resumes the chat asynchronously.
func (c *chatsResource) input(w http.ResponseWriter, r *http.Request) {
	id, key, withSpec, ok := c.keyedParams(w, r)
	if !ok {
		return
	}
	body, err := readBody(w, r, c.cfg.MaxBodyBytes)
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	var in inputRequest
	if err := decodeStrict(body, &in); err != nil {
		c.writeError(w, r, err)
		return
	}
	if err := in.validate(); err != nil {
		c.writeError(w, r, err)
		return
	}
	ch, err := c.chats.Input(r.Context(), Tenant(r.Context()), id, key, in.toInput())
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	c.writeChat(w, r, http.StatusAccepted, ch, withSpec)
}

// cancel handles POST /v1/chats/{id}/cancel: 202 when the cancel was
// recorded (the worker ends the chat shortly), 200 when the chat had already
// ended and is returned unchanged. Repeating it is harmless.
func (c *chatsResource) cancel(w http.ResponseWriter, r *http.Request) {
	id, withSpec, ok := c.chatParams(w, r)
	if !ok {
		return
	}
	ch, changed, err := c.chats.Cancel(r.Context(), Tenant(r.Context()), id)
	c.requested(w, r, ch, changed, withSpec, err)
}

// requested answers a request the chat's worker acts on (cancel, stop):
// 202 when it was recorded, 200 with the chat unchanged when there was
// nothing to do. No body is read.
func (c *chatsResource) requested(w http.ResponseWriter, r *http.Request, ch *chat.Chat, changed, withSpec bool, err error) {
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if changed {
		status = http.StatusAccepted
	}
	c.writeChat(w, r, status, ch, withSpec)
}

// runs handles POST /v1/chats/{id}/runs: 202 with the chat and the posted
// run's number; a worker starts the run (docs/runs.md).
func (c *chatsResource) runs(w http.ResponseWriter, r *http.Request) {
	id, key, withSpec, ok := c.keyedParams(w, r)
	if !ok {
		return
	}
	body, err := readBody(w, r, c.cfg.MaxBodyBytes)
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}") // a run without a task, answered as reject when busy
	}
	if err := checkOneJSONValue(body); err != nil {
		c.writeError(w, r, err)
		return
	}
	ch, n, err := c.chats.SubmitRun(r.Context(), Tenant(r.Context()), id, key, spec.DecodeRunRequest(body))
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	resp, err := newChatResponse(ch, withSpec)
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	resp.PostedRun = n
	c.writeJSON(w, r, http.StatusAccepted, resp)
}

// stop handles POST /v1/chats/{id}/stop: AgentChat's ExternalTermination,
// the run ends after its current turn. 202 when a run was asked to stop,
// 200 with the chat unchanged when none was active.
func (c *chatsResource) stop(w http.ResponseWriter, r *http.Request) {
	id, key, withSpec, ok := c.keyedParams(w, r)
	if !ok {
		return
	}
	ch, changed, err := c.chats.StopRun(r.Context(), Tenant(r.Context()), id, key)
	c.requested(w, r, ch, changed, withSpec, err)
}

// fork handles POST /v1/chats/{id}/fork: 201 with the new chat.
func (c *chatsResource) fork(w http.ResponseWriter, r *http.Request) {
	id, key, withSpec, ok := c.keyedParams(w, r)
	if !ok {
		return
	}
	body, err := readBody(w, r, c.cfg.MaxBodyBytes)
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := checkOneJSONValue(body); err != nil {
			c.writeError(w, r, err)
			return
		}
	}
	ch, err := c.chats.Fork(r.Context(), Tenant(r.Context()), id, key, spec.DecodeForkRequest(body))
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	noteChat(r.Context(), ch.ID)
	w.Header().Set("Location", "/v1/chats/"+ch.ID)
	c.writeChat(w, r, http.StatusCreated, ch, withSpec)
}

// chatParams reads what every request about one chat may say: the chat's
// id and ?include=spec; a bad one is answered here (ok false).
func (c *chatsResource) chatParams(w http.ResponseWriter, r *http.Request) (id string, withSpec, ok bool) {
	id, err := chatIDParam(r)
	if err == nil {
		withSpec, err = includeSpec(r)
	}
	if err != nil {
		c.writeError(w, r, err)
		return "", false, false
	}
	return id, withSpec, true
}

// keyedParams reads, besides chatParams, the Idempotency-Key of a POST on
// the chat that creates something ("" if none).
func (c *chatsResource) keyedParams(w http.ResponseWriter, r *http.Request) (id, key string, withSpec, ok bool) {
	id, withSpec, ok = c.chatParams(w, r)
	if !ok {
		return "", "", false, false
	}
	key, err := idempotencyKey(r)
	if err != nil {
		c.writeError(w, r, err)
		return "", "", false, false
	}
	return id, key, withSpec, true
}

// writeDeadlineSlack is added to a long poll's wait for the time it takes to
// read the final state and write the answer.
const writeDeadlineSlack = 10 * time.Second

// extendWriteDeadline lets a request that waits on purpose outlive the
// http.Server's WriteTimeout, which is sized for ordinary requests. Writers
// that cannot set deadlines (tests) have none to extend.
func extendWriteDeadline(w http.ResponseWriter, wait time.Duration) {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(wait + writeDeadlineSlack))
	// The body (if any) has been read; the read deadline would otherwise
	// end the wait by cancelling the request.
	_ = rc.SetReadDeadline(time.Now().Add(wait + writeDeadlineSlack))
}

// settled reports that nothing will happen to a chat without a client: it
// ended, or it waits for input that nobody has given yet. Waits (wait_s, the
// messages long-poll) return then rather than sit out their time.
func settled(ch *chat.Chat) bool {
	return settledProgress(chat.Progress{Status: ch.Status, InputAnswered: len(ch.InputResponse) > 0})
}

func settledProgress(p chat.Progress) bool {
	return p.Status.Terminal() || p.Status == chat.StatusAwaitingInput && !p.InputAnswered
}
