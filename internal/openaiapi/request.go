package openaiapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentd/agentd/internal/frontend"
	"github.com/agentd/agentd/internal/spec"
)

// Requests are decoded strictly: a field the API has and a team cannot
// honour (tools, several choices) is refused, sampling parameters are
// accepted and ignored (the team's agents have their own models and
// settings; docs/openai.md lists them), and a field the API does not have
// is refused. Every problem is reported at once.

// problems collects what is wrong with a request.
type problems []struct{ param, message string }

func (p *problems) add(param, format string, args ...any) {
	*p = append(*p, struct{ param, message string }{param, fmt.Sprintf(format, args...)})
}

// err is the API's 400 listing every problem, nil when there is none.
func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	msgs := make([]string, len(p))
	for i, q := range p {
		msgs[i] = q.param + ": " + q.message
	}
	return NewError(http.StatusBadRequest, "invalid_request", p[0].param, strings.Join(msgs, "; "))
}

// readJSON reads a size-limited body and decodes it strictly into v. An
// over-long body is the *http.MaxBytesError the server answers 413.
func (h *Handler) readJSON(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := frontend.ReadBody(w, r, h.cfg.MaxBodyBytes)
	if err != nil {
		if frontend.TooLarge(err) {
			return err
		}
		return NewError(http.StatusBadRequest, "invalid_request", "", "the request body could not be read")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return NewError(http.StatusBadRequest, "invalid_json", "", "the request body is not what this endpoint takes: "+describe(err))
	}
	if dec.More() {
		return NewError(http.StatusBadRequest, "invalid_json", "", "the request body holds more than one JSON value")
	}
	return nil
}

// describe says what a JSON decoding error found, in terms of the body.
func describe(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return fmt.Sprintf("%s must be %s, not %s", typeErr.Field, typeErr.Type, typeErr.Value)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// given reports whether an optional field was sent with a value.
func given(raw json.RawMessage) bool {
	return len(raw) > 0 && !bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// inputMessage is a message of a chat completion's messages or a
// Responses input item of type message.
type inputMessage struct {
	Type    string          `json:"type,omitempty"`
	ID      string          `json:"id,omitempty"`
	Status  string          `json:"status,omitempty"`
	Role    string          `json:"role"`
	Name    string          `json:"name,omitempty"`
	Content json.RawMessage `json:"content"`
	// Refused: the team's agents call their own tools; a conversation
	// with a client's tool calls cannot be resumed by them.
	ToolCalls    json.RawMessage `json:"tool_calls,omitempty"`
	ToolCallID   json.RawMessage `json:"tool_call_id,omitempty"`
	FunctionCall json.RawMessage `json:"function_call,omitempty"`
	// Accepted and ignored.
	Refusal     json.RawMessage `json:"refusal,omitempty"`
	Audio       json.RawMessage `json:"audio,omitempty"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
}

// contentPart is a part of a message's content.
type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// text reads a message's content, a string or a list of text parts, at
// param.
func (m *inputMessage) text(param string, probs *problems) string {
	c := bytes.TrimSpace(m.Content)
	if len(c) == 0 || c[0] == 'n' {
		if m.Role != "assistant" {
			probs.add(param+".content", "is required")
		}
		return ""
	}
	if c[0] == '"' {
		var s string
		if err := json.Unmarshal(c, &s); err != nil {
			probs.add(param+".content", "must be a string or a list of text parts")
		}
		return s
	}
	var parts []json.RawMessage
	if err := json.Unmarshal(c, &parts); err != nil {
		probs.add(param+".content", "must be a string or a list of text parts")
		return ""
	}
	var texts []string
	for i, raw := range parts {
		var p contentPart
		if err := json.Unmarshal(raw, &p); err != nil {
			probs.add(fmt.Sprintf("%s.content[%d]", param, i), "must be a content part object")
			continue
		}
		switch p.Type {
		case "text", "input_text", "output_text":
			texts = append(texts, p.Text)
		default:
			probs.add(fmt.Sprintf("%s.content[%d].type", param, i), "%q is not supported: a team is given text parts only", p.Type)
		}
	}
	return strings.Join(texts, "\n")
}

// conversation is a request's messages read as a task and the history
// before it.
type conversation struct {
	task    string
	history []spec.HistoryMessage
}

// readConversation reads messages (at param, e.g. "messages"): the last
// must be the user's, and is the task; the ones before it are the history.
func readConversation(param string, msgs []inputMessage, probs *problems) conversation {
	var conv conversation
	if len(msgs) == 0 {
		probs.add(param, "must hold at least one message: the last, the user's, is the task")
		return conv
	}
	for i := range msgs {
		m := &msgs[i]
		p := param + "[" + strconv.Itoa(i) + "]"
		if m.Type != "" && m.Type != "message" {
			probs.add(p+".type", "%q is not supported: items are messages", m.Type)
			continue
		}
		if given(m.ToolCalls) || given(m.FunctionCall) || given(m.ToolCallID) {
			probs.add(p, "tool calls are the team's own: a conversation with a client's tool calls cannot be continued by a team")
			continue
		}
		role := m.Role
		switch role {
		case "user", "assistant", "system":
		case "developer":
			role = "system"
		default:
			probs.add(p+".role", "must be one of user, assistant, system, developer")
			continue
		}
		text := m.text(p, probs)
		if i == len(msgs)-1 {
			if m.Role != "user" {
				probs.add(p+".role", "the last message is the task, so it must be the user's")
			}
			conv.task = text
			continue
		}
		conv.history = append(conv.history, spec.HistoryMessage{Role: role, Name: m.Name, Content: spec.MessageContent{Text: text}})
	}
	return conv
}

// createBody is the request creating a chat from a saved team.
type createBody struct {
	TeamRef  string                `json:"team_ref"`
	Task     string                `json:"task"`
	Messages []spec.HistoryMessage `json:"messages,omitempty"`
	Metadata map[string]string     `json:"metadata,omitempty"`
}

// checkMetadata checks the API's metadata limits: 16 pairs, keys of up to
// 64 characters, values of up to 512.
func checkMetadata(md map[string]string, probs *problems) {
	if len(md) > 16 {
		probs.add("metadata", "at most 16 key-value pairs")
	}
	for k, v := range md {
		if len(k) > 64 {
			probs.add("metadata", "a key is at most 64 characters")
		}
		if len(v) > 512 {
			probs.add("metadata."+k, "a value is at most 512 characters")
		}
	}
}

// refuse adds a problem for each of the fields (name, value pairs, in the
// order given) that was sent.
func refuse(probs *problems, why string, fields ...any) {
	for i := 0; i+1 < len(fields); i += 2 {
		if given(fields[i+1].(json.RawMessage)) {
			probs.add(fields[i].(string), "%s", why)
		}
	}
}
