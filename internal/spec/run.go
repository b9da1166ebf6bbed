package spec

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/agentd/agentd/internal/spec/problem"
)

// This file reads the bodies that post a run (POST /v1/chats/{id}/runs)
// and fork a chat (POST /v1/chats/{id}/fork), and the task of a chat's
// first run, into typed requests. Decoding checks their shape: what can be
// told from the body alone. What needs the chat's stored spec (a task
// message's source must not be an agent, a handoff must name one) or the
// server's limits is checked where the run is posted
// (engine.CheckRun). So that a client is still told every problem at
// once, a decoded request carries the problems its decoding found on to
// that check instead of being refused here.

// The values of a run request's if_busy: what to do when the chat is busy.
const (
	// IfBusyReject refuses the run (409), the default.
	IfBusyReject = "reject"
	// IfBusyEnqueue queues it after the runs before it.
	IfBusyEnqueue = "enqueue"
	// IfBusyInterrupt ends the active run and starts this one.
	IfBusyInterrupt = "interrupt"
)

// MaxTaskMessages bounds the messages of one run's task.
const MaxTaskMessages = 100

// TaskMessage is one message of a run's task: AgentChat's TextMessage, a
// MultiModalMessage, or a HandoffMessage that resumes a Swarm at its
// target.
type TaskMessage struct {
	Type    string `json:"type"`
	Source  string `json:"source,omitempty"`
	Content string `json:"content"`
	Target  string `json:"target,omitempty"`
	// Parts are a MultiModalMessage's content (its Content is empty).
	Parts []Part `json:"parts,omitempty"`
	// Path is the message's JSON pointer in the request it came from
	// ("/task", "/task/2"): where the checks against the chat's spec
	// report its problems. It is not stored.
	Path string `json:"-"`
}

// RunRequest is the body of POST /v1/chats/{id}/runs, decoded by
// DecodeRunRequest.
type RunRequest struct {
	// Task is the run's new messages; nil for a run without one. A message
	// that could not be decoded is left out.
	Task []TaskMessage
	// IfBusy is IfBusyReject (the default), IfBusyEnqueue or
	// IfBusyInterrupt.
	IfBusy string
	// MaxRound is the run's own max_round; nil for the chat's.
	MaxRound *int
	// ContextVariables are merged into the chat's variables as the run
	// starts (a null removes one); nil for no change.
	ContextVariables map[string]json.RawMessage
	// Problems are what decoding found wrong, each at its JSON pointer in
	// the body. The request is refused with them and with what the check
	// against the chat's spec finds (engine.CheckRun), all at once.
	Problems []Problem
	// Body is the request as the client sent it: what an Idempotency-Key
	// compares, so that a repeat is the same bytes up to whitespace.
	Body json.RawMessage
}

// DecodeRunRequest reads the body of POST /runs: its fields, and the shape
// of its task. It never fails: what is wrong is in the request's Problems.
func DecodeRunRequest(body []byte) *RunRequest {
	req := &RunRequest{IfBusy: IfBusyReject, Body: body}
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&fields); err != nil || dec.More() {
		req.Problems = []Problem{{Path: "", Message: "must be one JSON object: {\"task\"?, \"if_busy\"?, \"max_round\"?, \"context_variables\"?}"}}
		return req
	}
	var probs problem.List
	for _, k := range sortedKeys(fields) {
		raw := fields[k]
		switch k {
		case "task":
			req.Task = decodeTask("/task", raw, probs.Add)
		case "if_busy":
			if err := json.Unmarshal(raw, &req.IfBusy); err != nil ||
				!slices.Contains([]string{IfBusyReject, IfBusyEnqueue, IfBusyInterrupt}, req.IfBusy) {
				probs.Add("/if_busy", "must be %q (the default), %q or %q", IfBusyReject, IfBusyEnqueue, IfBusyInterrupt)
			}
		case "max_round":
			// Its range is the server's limit, checked with the run.
			if err := json.Unmarshal(raw, &req.MaxRound); err != nil {
				probs.Add("/max_round", "must be an integer")
				req.MaxRound = nil
			}
		case "context_variables":
			// Its size with the chat's variables is checked with the run.
			if string(bytes.TrimSpace(raw)) != "null" {
				req.ContextVariables, _ = CheckContext("/context_variables", raw, probs.Add)
			}
		default:
			probs.Add(problem.Key("", k), "is not a field of a run: use task, if_busy, max_round, context_variables")
		}
	}
	req.Problems = probs.Items()
	return req
}

// TextRun is the request of a run whose task is one text from user, as
// the body {"task": text} is decoded.
func TextRun(text string) *RunRequest {
	body, err := json.Marshal(map[string]string{"task": text})
	if err != nil {
		// A string always encodes (invalid UTF-8 is replaced).
		panic("encode a run's task: " + err.Error())
	}
	return DecodeRunRequest(body)
}

// ForkRequest is the body of POST /v1/chats/{id}/fork, decoded by
// DecodeForkRequest.
type ForkRequest struct {
	// AtSeq is where the copy of the log ends; nil for its last event.
	AtSeq *int64
	// Run is the run to start on the fork at once; nil for none. Its
	// problems are relative to it (under /run in the body).
	Run *RunRequest
	// ContextVariables are merged into the variables the copy of the log
	// leaves (a null removes one); nil for no change.
	ContextVariables map[string]json.RawMessage
	// Problems are what is wrong with the body itself: nothing else is
	// checked while there are any.
	Problems []Problem
	// Body is the request as sent, for an Idempotency-Key.
	Body json.RawMessage
}

// DecodeForkRequest reads the body of POST /fork, which may be empty.
func DecodeForkRequest(body []byte) *ForkRequest {
	req := &ForkRequest{Body: body}
	if len(bytes.TrimSpace(body)) == 0 {
		return req
	}
	var fr struct {
		AtSeq            *int64          `json:"at_seq"`
		Run              json.RawMessage `json:"run"`
		ContextVariables json.RawMessage `json:"context_variables"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fr); err != nil {
		req.Problems = []Problem{{Path: "", Message: "must be {\"at_seq\"?, \"run\"?, \"context_variables\"?}: " + err.Error()}}
		return req
	}
	req.AtSeq = fr.AtSeq
	if len(fr.ContextVariables) > 0 && string(fr.ContextVariables) != "null" {
		var probs problem.List
		req.ContextVariables, _ = CheckContext("/context_variables", fr.ContextVariables, probs.Add)
		req.Problems = probs.Items()
	}
	if len(fr.Run) > 0 && string(fr.Run) != "null" {
		req.Run = DecodeRunRequest(fr.Run) // its if_busy does not apply: the fork's run starts at once
	}
	return req
}

// DecodeTask reads the task of a chat's first run given as messages (a
// spec's task that is not a text), its problems under /task.
func DecodeTask(raw json.RawMessage) ([]TaskMessage, []Problem) {
	var probs problem.List
	task := decodeTask("/task", raw, probs.Add)
	return task, probs.Items()
}

// decodeTask reads a run's task at path: a string (a TextMessage from
// user), a message, a non-empty list of messages, or null (no new
// message).
func decodeTask(path string, raw json.RawMessage, add func(path, format string, args ...any)) []TaskMessage {
	raw = bytes.TrimSpace(raw)
	switch {
	case string(raw) == "null":
		return nil
	case len(raw) > 0 && raw[0] == '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		m := TaskMessage{Type: TypeTextMessage, Source: UserName, Content: s, Path: path}
		checkTaskShape(&m, add)
		return []TaskMessage{m}
	case len(raw) > 0 && raw[0] == '{':
		m, ok := decodeTaskMessage(path, raw, add)
		if !ok {
			return nil
		}
		return []TaskMessage{m}
	case len(raw) > 0 && raw[0] == '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			add(path, "must be a list of messages")
			return nil
		}
		if len(items) == 0 {
			add(path, "a list of task messages cannot be empty (leave task out to continue without a new message)")
		}
		if len(items) > MaxTaskMessages {
			add(path, "holds at most %d messages", MaxTaskMessages)
			return nil
		}
		var out []TaskMessage
		for i, it := range items {
			if m, ok := decodeTaskMessage(problem.Index(path, i), it, add); ok {
				out = append(out, m)
			}
		}
		return out
	}
	add(path, "must be a string, a message ({\"type\": \"TextMessage\" | \"MultiModalMessage\" | \"HandoffMessage\", \"source\"?, \"content\", \"target\"?}), a list of messages, or null")
	return nil
}

// decodeTaskMessage reads one task message; ok is false when one of its
// fields could not be read (it is then not checked further).
func decodeTaskMessage(path string, raw json.RawMessage, add func(path, format string, args ...any)) (m TaskMessage, ok bool) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		add(path, "must be a message object")
		return TaskMessage{}, false
	}
	m = TaskMessage{Source: UserName, Path: path}
	ok = true
	str := func(k string, dst *string) {
		if v, present := fields[k]; present {
			if err := json.Unmarshal(v, dst); err != nil {
				add(path+"/"+k, "must be a string")
				ok = false
			}
		}
	}
	for _, k := range sortedKeys(fields) {
		switch k {
		case "type", "source", "content", "target":
		default:
			add(problem.Key(path, k), "is not a field of a task message: use type, source, content, target")
			ok = false
		}
	}
	str("type", &m.Type)
	str("source", &m.Source)
	str("target", &m.Target)
	if m.Type == TypeMultiModalMessage {
		if c, present := fields["content"]; present && !decodeParts(path+"/content", c, &m.Parts, add) {
			ok = false
		}
	} else {
		str("content", &m.Content)
	}
	if _, present := fields["content"]; !present {
		add(path+"/content", "is required")
		ok = false
	}
	if !ok {
		return TaskMessage{}, false
	}
	checkTaskShape(&m, add)
	return m, true
}

// checkTaskShape checks what a task message must be whatever the chat:
// its type, a content the store can hold, a source that could be a name,
// a target only on a handoff.
func checkTaskShape(m *TaskMessage, add func(path, format string, args ...any)) {
	switch m.Type {
	case TypeTextMessage, TypeHandoffMessage, TypeMultiModalMessage:
	case "":
		add(m.Path+"/type", "is required: TextMessage, MultiModalMessage or HandoffMessage")
	default:
		add(m.Path+"/type", "must be TextMessage, MultiModalMessage or HandoffMessage")
	}
	if strings.IndexByte(m.Content, 0) >= 0 {
		add(m.Path+"/content", "must not contain the NUL character (\\u0000), which the store cannot hold")
	}
	switch {
	case m.Source == "":
		m.Source = UserName
	case m.Source != UserName && !ValidAgentName(m.Source):
		add(m.Path+"/source", "must be user or a name like an agent's (letters, digits, _ and -)")
	}
	if m.Type != TypeHandoffMessage && m.Target != "" {
		add(m.Path+"/target", "only a HandoffMessage has a target")
	}
}

// decodeParts reads a MultiModalMessage's content: a list of texts and
// images (Part), each problem reported at its item.
func decodeParts(path string, raw json.RawMessage, dst *[]Part, add func(path, format string, args ...any)) bool {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || items == nil {
		add(path, "a MultiModalMessage's content must be a list of texts and images ({\"image\": {\"data\": \"<base64>\"}})")
		return false
	}
	ok := true
	parts := make([]Part, len(items))
	for i, it := range items {
		if err := json.Unmarshal(it, &parts[i]); err != nil {
			add(problem.Index(path, i), "%s", err.Error())
			ok = false
		}
	}
	*dst = parts
	return ok
}
