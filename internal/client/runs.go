package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/agentd/agentd/internal/api"
)

type (
	// RunRequest is the body of POST /v1/chats/{id}/runs: the next run of
	// a chat. Task is a string, a message, a list of messages, or nil.
	RunRequest = api.RunRequest
	// TaskMessage is a message of a run's task.
	TaskMessage = api.TaskMessage
	// Approval is a decision on a held tool call (ToolCallID) or on held
	// code.
	Approval = api.Approval
)

// Run posts the chat's next run; the answer's PostedRun is its number.
func (c *Client) Run(ctx context.Context, id string, r RunRequest) (*Chat, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	var ch Chat
	return &ch, c.do(ctx, http.MethodPost, "/v1/chats/"+url.PathEscape(id)+"/runs", body, &ch, &ch.Raw)
}

// Stop asks the chat's active run to end after its current turn.
func (c *Client) Stop(ctx context.Context, id string) (*Chat, error) {
	var ch Chat
	return &ch, c.do(ctx, http.MethodPost, "/v1/chats/"+url.PathEscape(id)+"/stop", []byte("{}"), &ch, &ch.Raw)
}

// Fork makes a new chat from this one's log up to atSeq (0: the last), with
// a first run when run is set.
func (c *Client) Fork(ctx context.Context, id string, atSeq int64, run *RunRequest) (*Chat, error) {
	body, err := json.Marshal(api.ForkRequest{AtSeq: atSeq, Run: run})
	if err != nil {
		return nil, err
	}
	var ch Chat
	return &ch, c.do(ctx, http.MethodPost, "/v1/chats/"+url.PathEscape(id)+"/fork", body, &ch, &ch.Raw)
}

// Approve answers a pending approval request.
func (c *Client) Approve(ctx context.Context, id, requestID string, approvals []Approval) (*Chat, error) {
	body, err := json.Marshal(api.Input{RequestID: requestID, Approvals: approvals})
	if err != nil {
		return nil, err
	}
	var ch Chat
	return &ch, c.do(ctx, http.MethodPost, "/v1/chats/"+url.PathEscape(id)+"/input", body, &ch, &ch.Raw)
}
