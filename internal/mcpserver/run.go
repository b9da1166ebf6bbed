package mcpserver

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/internal/api"
	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
)

// maxProgressText bounds the message text a progress notification quotes.
const maxProgressText = 200

// outcomeShutdown is the outcome of a call cut by the server's shutdown.
const outcomeShutdown = "server_shutting_down"

// runResult is a team tool's structured content.
type runResult struct {
	ChatID       string `json:"chat_id"`
	Status       string `json:"status"`
	StopReason   string `json:"stop_reason,omitempty"`
	FinalMessage string `json:"final_message,omitempty"`
	FinalSpeaker string `json:"final_speaker,omitempty"`
}

// runTeam is the handler of a team's tool: it creates a chat from the
// team with the task, reports each message as progress, and answers with
// the final message once the run ends (or waits for a human). A call the
// client cancels cancels the run.
func (ts *tenantServer) runTeam(team string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		task, msg := taskOf(req.Params.Arguments)
		if msg != "" {
			ts.h.metrics.calls.WithLabelValues("invalid").Inc()
			return errorResult(msg, nil), nil
		}
		body, err := json.Marshal(map[string]string{"team_ref": team, "task": task})
		if err != nil {
			return nil, err
		}
		c, _, err := ts.h.chats.Create(ctx, &chat.CreateParams{Tenant: ts.tenant, Body: body})
		var ve *spec.ValidationError
		switch {
		case errors.As(err, &ve):
			var lines []string
			for _, p := range ve.Problems {
				lines = append(lines, p.Path+": "+p.Message)
			}
			ts.h.metrics.calls.WithLabelValues("invalid").Inc()
			return errorResult("the team cannot run this task: "+strings.Join(lines, "; "), nil), nil
		case err != nil:
			ts.h.metrics.calls.WithLabelValues("error").Inc()
			ts.h.log.Error("mcp: create a chat for a tool call", "team", team, "tenant", ts.tenant, "error", err)
			return nil, errors.New("internal error: the chat cannot be created")
		}
		ts.h.log.Info("mcp tool call started", "chat_id", c.ID, "team", team, "tenant", ts.tenant)
		res, outcome, err := ts.follow(ctx, req, c.ID)
		ts.h.metrics.calls.WithLabelValues(outcome).Inc()
		if err != nil && ctx.Err() != nil {
			// The client cancelled the call (or went away): the run it
			// started is cancelled too, on a context of its own.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
			defer cancel()
			if _, _, cerr := ts.h.chats.Cancel(cctx, ts.tenant, c.ID); cerr != nil {
				ts.h.log.Error("mcp: cancel the run of a cancelled call", "chat_id", c.ID, "error", cerr)
			} else {
				ts.h.log.Info("mcp tool call cancelled: run cancelled", "chat_id", c.ID, "team", team, "tenant", ts.tenant)
			}
			return nil, err
		}
		if outcome == outcomeShutdown {
			ts.h.log.Warn("mcp tool call cut by shutdown: its run goes on", "chat_id", c.ID, "team", team, "tenant", ts.tenant)
		}
		if err != nil {
			ts.h.log.Error("mcp: follow a tool call's chat", "chat_id", c.ID, "error", err)
			return nil, errors.New("internal error: the chat cannot be read")
		}
		return res, nil
	}
}

// follow reads the chat's log until its run ends or waits for input,
// sending a progress notification per message when the client asked for
// progress. It returns the tool's result and the call's outcome.
func (ts *tenantServer) follow(ctx context.Context, req *mcp.CallToolRequest, chatID string) (*mcp.CallToolResult, string, error) {
	wake, stop := ts.h.chats.Subscribe(chatID)
	defer stop()
	poll := time.NewTicker(ts.h.cfg.Poll)
	defer poll.Stop()
	token := req.Params.GetProgressToken()
	var (
		after   int64
		running bool // the task is before chat.running, the team's messages after
		n       int
		final   runResult
	)
	final.ChatID = chatID
	for {
		evs, err := ts.h.chats.Events(ctx, ts.tenant, chatID, after, eventPage)
		if err != nil {
			return nil, "error", err
		}
		for _, e := range evs {
			after = e.Seq
			switch {
			case e.Type == chat.EventChatRunning:
				running = true
			case e.Type == chat.EventMessage && running:
				m, _ := chat.MessageFromEvent(e)
				if m.Content == "" || m.Team != "" || len(m.ToolCalls) > 0 || (m.Role != chat.RoleAssistant && m.Role != chat.RoleUser) {
					continue
				}
				n++
				final.FinalMessage, final.FinalSpeaker = m.Content, m.Name
				if token != nil {
					text := m.Content
					if len(text) > maxProgressText {
						text = text[:maxProgressText] + "…"
					}
					// Progress is advisory: a client that cannot take it
					// does not stop the run.
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token,
						Progress: float64(n), Message: m.Name + ": " + text})
				}
			case e.Type == chat.EventInputRequested:
				final.Status = string(chat.StatusAwaitingInput)
				var p chat.PendingInput
				_ = json.Unmarshal(e.Data, &p)
				text := fmt.Sprintf("The team waits for input (%s): %s Answer it with POST /v1/chats/%s/input (request_id %s), or through its A2A agent.",
					p.Kind, p.Reason, chatID, p.RequestID)
				return result(text, final, false), string(chat.StatusAwaitingInput), nil
			case e.Type.Terminal():
				d, _ := api.EndingOf(e)
				final.Status, final.StopReason = string(d.Status), string(d.StopReason)
				if d.Status == chat.StatusCompleted {
					return result(final.FinalMessage, final, false), final.Status, nil
				}
				return result(fmt.Sprintf("The team's run %s: %s", d.Status, cmp.Or(d.Error, d.StopDetail)), final, true), final.Status, nil
			}
		}
		if len(evs) == eventPage {
			continue
		}
		select {
		case <-ctx.Done():
			return nil, "client_cancelled", ctx.Err()
		case <-ts.h.ended:
			// The server shuts down: the call cannot wait for the run,
			// which goes on on another replica. An error result, not
			// the final message: the client must not take it for the
			// team's answer.
			final.Status = string(chat.StatusRunning)
			text := fmt.Sprintf("The server is shutting down before the team's run ended; the run goes on in chat %s: "+
				"read the resource %s%s for its transcript once it ends.", chatID, chatURIPrefix, chatID)
			return result(text, final, true), outcomeShutdown, nil
		case <-wake:
		case <-poll.C:
		}
	}
}

// taskOf reads the tool's arguments: {"task": "..."}.
func taskOf(raw json.RawMessage) (string, string) {
	var args struct {
		Task *string `json:"task"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&args); err != nil || args.Task == nil {
		return "", `the arguments must be {"task": "<the task for the team>"}`
	}
	if strings.TrimSpace(*args.Task) == "" {
		return "", "the task must not be empty"
	}
	return *args.Task, ""
}

func result(text string, rr runResult, isError bool) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: rr, IsError: isError}
}

func errorResult(text string, structured any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: structured, IsError: true}
}
