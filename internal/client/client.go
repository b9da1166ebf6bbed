// Package client is a small Go client of agentd's HTTP API: chats, messages,
// input, cancel and the server-sent event stream (with resume after a
// drop). The command's `agentd chat` subcommands are built on it.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentd/agentd/internal/api"
)

// Client talks to one agentd server.
type Client struct {
	base   string
	apiKey string
	http   *http.Client
}

// New returns a client of the server at baseURL (e.g. http://127.0.0.1:8080)
// that sends apiKey, when not empty, as a bearer key. A nil httpClient
// means http.DefaultClient.
func New(baseURL, apiKey string, httpClient *http.Client) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server URL %q: want http(s)://host[:port]", baseURL)
	}
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	return &Client{base: strings.TrimSuffix(baseURL, "/"), apiKey: apiKey, http: httpClient}, nil
}

// The wire types are internal/api's, which the server encodes with: a
// client and the server it talks to share one definition of them. The
// client's own types add the JSON the server sent (Raw), which the CLI
// prints as it came.
type (
	// Usage is a token count.
	Usage = api.Usage
	// PendingInput is what a chat in awaiting_input waits for.
	PendingInput = api.PendingInput
	// ToolCall is a function call a model asked for.
	ToolCall = api.ToolCall
	// ToolResponse answers one tool call.
	ToolResponse = api.ToolResponse
	// CodeResult is the result of a code execution.
	CodeResult = api.CodeResult
	// Problem is an error answer of the API (RFC 9457 problem details).
	Problem = api.Problem
	// ProblemField is one problem, at a JSON pointer or parameter name.
	ProblemField = api.ProblemField
)

// Chat is the chat object. Raw is the JSON the server sent.
type Chat struct {
	api.Chat
	Raw json.RawMessage `json:"-"`
}

// ChatList is a page of chats.
type ChatList struct {
	api.ChatList
	Raw json.RawMessage `json:"-"`
}

// Message is a message of a chat's log. Raw is the JSON the server sent.
type Message struct {
	api.Message
	Raw json.RawMessage `json:"-"`
}

// Create creates a chat from a spec (JSON).
func (c *Client) Create(ctx context.Context, spec []byte) (*Chat, error) {
	var ch Chat
	return &ch, c.do(ctx, http.MethodPost, "/v1/chats", spec, &ch, &ch.Raw)
}

// Get returns a chat.
func (c *Client) Get(ctx context.Context, id string) (*Chat, error) {
	var ch Chat
	return &ch, c.do(ctx, http.MethodGet, "/v1/chats/"+url.PathEscape(id), nil, &ch, &ch.Raw)
}

// ListParams selects a page of chats; zero values mean the server's defaults.
type ListParams struct {
	Status string
	Limit  int
	Cursor string
	// Metadata filters, each "KEY=VALUE"; every one must hold.
	Metadata []string
	Name     string
	Team     string
}

// List returns a page of chats, newest first.
func (c *Client) List(ctx context.Context, p ListParams) (*ChatList, error) {
	q := url.Values{}
	if p.Status != "" {
		q.Set("status", p.Status)
	}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
	for _, m := range p.Metadata {
		k, v, _ := strings.Cut(m, "=")
		q.Add("metadata."+k, v)
	}
	if p.Name != "" {
		q.Set("name", p.Name)
	}
	if p.Team != "" {
		q.Set("team", p.Team)
	}
	var l ChatList
	path := "/v1/chats"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return &l, c.do(ctx, http.MethodGet, path, nil, &l, &l.Raw)
}

// Messages returns every message of a chat, reading page after page.
func (c *Client) Messages(ctx context.Context, id string) ([]Message, error) {
	var all []Message
	after := int64(0)
	for {
		var page struct {
			api.MessageList
			Messages []json.RawMessage `json:"messages"`
		}
		path := fmt.Sprintf("/v1/chats/%s/messages?after=%d&limit=1000", url.PathEscape(id), after)
		if err := c.do(ctx, http.MethodGet, path, nil, &page, nil); err != nil {
			return nil, err
		}
		for _, raw := range page.Messages {
			var m Message
			if err := json.Unmarshal(raw, &m.Message); err != nil {
				return nil, fmt.Errorf("decode message: %w", err)
			}
			m.Raw = raw
			all = append(all, m)
		}
		if len(page.Messages) == 0 || page.LastSeq <= after {
			return all, nil
		}
		after = page.LastSeq
	}
}

// Input answers a chat's pending input: content for a human message, or
// speaker for a manual selection (exactly one is non-nil).
func (c *Client) Input(ctx context.Context, id, requestID string, content, speaker *string) (*Chat, error) {
	in := api.Input{RequestID: requestID, Speaker: speaker}
	if content != nil {
		in.Content = *content
	}
	body, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	var ch Chat
	return &ch, c.do(ctx, http.MethodPost, "/v1/chats/"+url.PathEscape(id)+"/input", body, &ch, &ch.Raw)
}

// Cancel asks a chat to stop.
func (c *Client) Cancel(ctx context.Context, id string) (*Chat, error) {
	var ch Chat
	// An empty JSON object: the body is not read, but a server may require
	// state-changing requests to be JSON.
	return &ch, c.do(ctx, http.MethodPost, "/v1/chats/"+url.PathEscape(id)+"/cancel", []byte("{}"), &ch, &ch.Raw)
}

func (c *Client) newRequest(ctx context.Context, method, path string, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	return req, nil
}

// do sends a request and decodes a 2xx answer into out (and its bytes into
// raw); other answers become a *Problem.
func (c *Client) do(ctx context.Context, method, path string, body []byte, out any, raw *json.RawMessage) error {
	req, err := c.newRequest(ctx, method, path, body)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return problemOf(resp, b)
	}
	if raw != nil {
		*raw = b
	}
	if out == nil {
		return nil // an answer without a body (204)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

func problemOf(resp *http.Response, b []byte) error {
	p := &Problem{}
	if err := json.Unmarshal(b, p); err != nil || p.Status == 0 {
		return &Problem{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode), Detail: strings.TrimSpace(string(b))}
	}
	return p
}

// Event is one server-sent event. ID is 0 for ephemeral events (message.delta).
type Event struct {
	ID    int64           `json:"id,omitempty"`
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data"`
}

// Terminal reports whether the event ends the stream.
func (e Event) Terminal() bool {
	return e.Event == "chat.completed" || e.Event == "chat.failed" || e.Event == "chat.cancelled"
}

// FollowOptions say when following a chat ends.
type FollowOptions struct {
	// All follows the chat across its runs (follow=true) until ctx ends.
	All bool
	// UntilRun, when set, ends after the terminal event of that run.
	UntilRun int
}

// Follow streams a chat's events after seq `after` to fn until the stream
// ends after the terminal event of the chat's latest run, the server's 204
// (the client has seen the end), an error of fn or of the API, or ctx
// ends. A dropped connection is resumed with Last-Event-ID after
// retryDelay, so fn sees every event once, in order.
func (c *Client) Follow(ctx context.Context, id string, after int64, retryDelay time.Duration, fn func(Event) error) error {
	return c.FollowWith(ctx, id, after, FollowOptions{}, retryDelay, fn)
}

// FollowWith is Follow with options.
func (c *Client) FollowWith(ctx context.Context, id string, after int64, opts FollowOptions, retryDelay time.Duration, fn func(Event) error) error {
	for {
		done, err := c.followOnce(ctx, id, &after, opts, fn)
		if done || ctx.Err() != nil {
			return err
		}
		var p *Problem
		var fnErr callbackError
		if errors.As(err, &p) || errors.As(err, &fnErr) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(retryDelay):
		}
	}
}

type callbackError struct{ error }

func (e callbackError) Unwrap() error { return e.error }

func (c *Client) followOnce(ctx context.Context, id string, after *int64, opts FollowOptions, fn func(Event) error) (done bool, err error) {
	path := "/v1/chats/" + url.PathEscape(id) + "/events"
	if opts.All || opts.UntilRun > 0 {
		path += "?follow=true"
	}
	req, err := c.newRequest(ctx, http.MethodGet, path, nil)
	if err != nil {
		return true, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", strconv.FormatInt(*after, 10))
	resp, err := c.http.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNoContent:
		return true, nil
	case resp.StatusCode != http.StatusOK:
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode < 500, problemOf(resp, b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var ev Event
	var data []string
	// ended: the last event ended a run; a stream that then ends cleanly
	// is over (a replayed earlier run's end is followed by more events).
	ended := false
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if ev.Event != "" || len(data) > 0 {
				ev.Data = json.RawMessage(strings.Join(data, "\n"))
				if ev.Event == "" {
					ev.Event = "message"
				}
				if err := fn(ev); err != nil {
					return true, callbackError{err}
				}
				if ev.ID > 0 {
					*after = ev.ID
				}
				ended = ev.Terminal()
				if ended && opts.UntilRun > 0 && ev.Run() == opts.UntilRun {
					return true, nil
				}
			}
			ev, data = Event{}, nil
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.ID, _ = strconv.ParseInt(value, 10, 64)
		case "event":
			ev.Event = value
		case "data":
			data = append(data, value)
		}
	}
	if err := sc.Err(); err != nil {
		return false, err
	}
	if ended && !opts.All && opts.UntilRun == 0 {
		return true, nil
	}
	return false, io.ErrUnexpectedEOF
}

// Run is the run a run.started or terminal event names (0 for others).
func (e Event) Run() int {
	var d struct {
		Run int `json:"run"`
	}
	_ = json.Unmarshal(e.Data, &d)
	return d.Run
}
