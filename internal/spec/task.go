package spec

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Task is a spec's task, which starts run 1 as AgentChat's team.run(task)
// does: a text (a TextMessage from user) or, as a later run's task may be
// (POST /runs), a message object (TextMessage, MultiModalMessage,
// HandoffMessage) or a list of them. The spec keeps a message or a list as
// the request gave it; the engine reads and checks it when the chat is
// created, since what a task message may be depends on the chat's agents.
type Task struct {
	Text string
	// Messages is the task when it is a message or a list of messages.
	Messages json.RawMessage
}

// TextTask is a task of one text.
func TextTask(text string) Task { return Task{Text: text} }

// Empty is whether there is no task: an empty text.
func (t Task) Empty() bool { return t.Messages == nil && t.Text == "" }

// MarshalJSON writes the text, or the messages as given.
func (t Task) MarshalJSON() ([]byte, error) {
	if t.Messages != nil {
		return t.Messages, nil
	}
	return json.Marshal(t.Text)
}

// errTaskShape is what a task of another JSON type is told.
var errTaskShape = errors.New("must be a string, a message ({\"type\": \"TextMessage\" | \"MultiModalMessage\" | \"HandoffMessage\", \"source\"?, \"content\", \"target\"?}) or a list of messages")

// UnmarshalJSON reads a string, an object or a list.
func (t *Task) UnmarshalJSON(b []byte) error {
	*t = Task{}
	b = bytes.TrimSpace(b)
	switch {
	case len(b) > 0 && (b[0] == '{' || b[0] == '['):
		if !json.Valid(b) {
			return errTaskShape
		}
		t.Messages = append(json.RawMessage(nil), b...)
		return nil
	case len(b) > 0 && b[0] == '"', string(b) == "null":
		return json.Unmarshal(b, &t.Text)
	}
	return errTaskShape
}
