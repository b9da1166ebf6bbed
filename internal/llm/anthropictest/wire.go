package anthropictest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// MessagesRequest is a decoded POST /v1/messages body.
type MessagesRequest struct {
	Model      string          `json:"model"`
	MaxTokens  *int            `json:"max_tokens"`
	Messages   []Message       `json:"messages"`
	System     json.RawMessage `json:"system,omitempty"`
	Tools      []Tool          `json:"tools,omitempty"`
	ToolChoice *ToolChoice     `json:"tool_choice,omitempty"`
	Stream     bool            `json:"stream,omitempty"`
	Thinking   json.RawMessage `json:"thinking,omitempty"`
	Metadata   json.RawMessage `json:"metadata,omitempty"`
	// Only on API version 2023-06-01.
	Temperature *float64 `json:"temperature,omitempty"`
	TopP        *float64 `json:"top_p,omitempty"`
	TopK        *int     `json:"top_k,omitempty"`

	StopSequences []string        `json:"stop_sequences,omitempty"`
	OutputConfig  json.RawMessage `json:"output_config,omitempty"`
	ServiceTier   string          `json:"service_tier,omitempty"`

	chars    int  // of the prompt's texts, for the usage estimate
	thinking bool // thinking is enabled (or adaptive)
}

// inToolLoop is whether the request continues an assistant turn: its last
// message is a user message of tool results only.
func (r *MessagesRequest) inToolLoop() bool {
	if len(r.Messages) == 0 {
		return false
	}
	last := r.Messages[len(r.Messages)-1]
	return last.Role == "user" && toolResultsOnly(last)
}

func toolResultsOnly(m Message) bool {
	for _, b := range m.Blocks {
		if b.Type != "tool_result" {
			return false
		}
	}
	return len(m.Blocks) > 0
}

// SystemText is the system prompt as text: the string, or the text blocks
// joined.
func (r *MessagesRequest) SystemText() string {
	var s string
	if json.Unmarshal(r.System, &s) == nil {
		return s
	}
	var blocks []Block
	_ = json.Unmarshal(r.System, &blocks)
	var b strings.Builder
	for _, x := range blocks {
		b.WriteString(x.Text)
	}
	return b.String()
}

// Message is one input message; Content is a string or a list of blocks
// (Blocks holds both forms, a string as one text block).
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Blocks  []Block         `json:"-"`
}

// Block is an input content block.
type Block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   *bool           `json:"is_error,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
	Data      string          `json:"data,omitempty"`
	Source    json.RawMessage `json:"source,omitempty"`
	// CacheControl and Citations are accepted and ignored.
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
	Citations    json.RawMessage `json:"citations,omitempty"`
}

// ResultText is a tool_result's content as text.
func (b Block) ResultText() string {
	var s string
	if json.Unmarshal(b.Content, &s) == nil {
		return s
	}
	var parts []Block
	_ = json.Unmarshal(b.Content, &parts)
	var out strings.Builder
	for _, p := range parts {
		out.WriteString(p.Text)
	}
	return out.String()
}

// Tool is a tool definition.
type Tool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	Type         string          `json:"type,omitempty"`
	Strict       *bool           `json:"strict,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// ToolChoice is the request's tool_choice.
type ToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse *bool  `json:"disable_parallel_tool_use,omitempty"`
}

var (
	toolNameRE  = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,128}$`)
	toolUseIDRE = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
)

// decodeStrict decodes one JSON value into v, refusing unknown fields with
// the API's "Extra inputs are not permitted".
func decodeStrict(raw []byte, v any, path string) *apiError {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		msg := err.Error()
		if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			return invalid("%s%s: Extra inputs are not permitted", path, strings.Trim(f, `"`))
		}
		return invalid("%s: %s", strings.TrimSuffix(path, "."), msg)
	}
	return nil
}

// parseRequest decodes and checks a body as the API would.
func parseRequest(body []byte, version string) (*MessagesRequest, *apiError) {
	var req MessagesRequest
	if e := decodeStrict(body, &req, ""); e != nil {
		if strings.Contains(e.msg, "Extra inputs") {
			return nil, e
		}
		return nil, invalid("There was an error parsing the body of your request: %s", e.msg)
	}
	switch {
	case req.Model == "":
		return &req, invalid("model: Field required")
	case req.MaxTokens == nil:
		return &req, invalid("max_tokens: Field required")
	case *req.MaxTokens < 0:
		return &req, invalid("max_tokens: Input should be greater than or equal to 0")
	case len(req.Messages) == 0:
		return &req, invalid("messages: Field required")
	}
	if version == "2026-10-21" {
		for name, set := range map[string]bool{"temperature": req.Temperature != nil, "top_p": req.TopP != nil, "top_k": req.TopK != nil} {
			if set {
				return &req, invalid("%s: Extra inputs are not permitted", name)
			}
		}
	}
	if len(req.System) > 0 {
		var s string
		if json.Unmarshal(req.System, &s) != nil {
			var blocks []Block
			if e := decodeStrict(req.System, &blocks, "system."); e != nil {
				return &req, e
			}
			for i, b := range blocks {
				if b.Type != "text" {
					return &req, invalid("system.%d.type: Input should be 'text'", i)
				}
				if strings.TrimSpace(b.Text) == "" {
					return &req, invalid("system.%d.text: text content blocks must contain non-whitespace text", i)
				}
			}
		}
		req.chars += utf8.RuneCountInString(req.SystemText())
	}
	tools := map[string]bool{}
	for i, t := range req.Tools {
		if t.Type != "" && t.Type != "custom" {
			return &req, invalid("tools.%d.type: only custom tools are served by anthropictest", i)
		}
		if !toolNameRE.MatchString(t.Name) {
			return &req, invalid("tools.%d.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'", i)
		}
		if tools[t.Name] {
			return &req, invalid("tools: Tool names must be unique.")
		}
		tools[t.Name] = true
		var schema map[string]json.RawMessage
		if len(t.InputSchema) == 0 || json.Unmarshal(t.InputSchema, &schema) != nil || schema == nil {
			return &req, invalid("tools.%d.input_schema: Field required", i)
		}
		if string(schema["type"]) != `"object"` {
			return &req, invalid("tools.%d.input_schema.type: Input should be 'object'", i)
		}
	}
	if req.ToolChoice != nil {
		if len(req.Tools) == 0 {
			return &req, invalid("tool_choice: tool_choice may only be specified while providing tools.")
		}
		switch req.ToolChoice.Type {
		case "auto", "any", "none":
		case "tool":
			if !tools[req.ToolChoice.Name] {
				return &req, invalid("tool_choice.name: Tool '%s' not found in provided tools", req.ToolChoice.Name)
			}
		default:
			return &req, invalid("tool_choice.type: Input tag '%s' found using 'type' does not match any of the expected tags", req.ToolChoice.Type)
		}
	}
	if e := checkThinking(&req); e != nil {
		return &req, e
	}
	if e := checkMessages(&req, len(req.Tools) > 0); e != nil {
		return &req, e
	}
	if e := checkTurnThinking(&req); e != nil {
		return &req, e
	}
	return &req, nil
}

func checkThinking(req *MessagesRequest) *apiError {
	if len(req.Thinking) == 0 {
		return nil
	}
	var t struct {
		Type         string `json:"type"`
		BudgetTokens *int   `json:"budget_tokens"`
		Display      string `json:"display"`
	}
	if e := decodeStrict(req.Thinking, &t, "thinking."); e != nil {
		return e
	}
	switch t.Type {
	case "disabled":
		if t.BudgetTokens != nil {
			return invalid("thinking.disabled.budget_tokens: Extra inputs are not permitted")
		}
		return nil
	case "adaptive":
	case "enabled":
		switch {
		case t.BudgetTokens == nil:
			return invalid("thinking.enabled.budget_tokens: Field required")
		case *t.BudgetTokens < 1024:
			return invalid("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
		case *t.BudgetTokens >= *req.MaxTokens:
			return invalid("`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size")
		}
	default:
		return invalid("thinking.type: Input tag '%s' found using 'type' does not match any of the expected tags", t.Type)
	}
	req.thinking = true
	// What thinking is not compatible with (the extended thinking guide's
	// feature compatibility).
	const compat = " Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility"
	switch {
	case req.Temperature != nil && *req.Temperature != 1:
		return invalid("`temperature` may only be set to 1 when thinking is enabled." + compat)
	case req.TopK != nil:
		return invalid("`top_k` must be unset when thinking is enabled." + compat)
	case req.TopP != nil && *req.TopP < 0.95:
		return invalid("`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled." + compat)
	case req.ToolChoice != nil && (req.ToolChoice.Type == "any" || req.ToolChoice.Type == "tool"):
		return invalid("Thinking may not be enabled when tool_choice forces tool use.")
	}
	return nil
}

// checkTurnThinking is what the API asks of a request in a tool loop while
// thinking is enabled: the assistant turn the loop belongs to (the
// assistant messages since the last user message that is not tool results
// only) starts with a thinking or redacted_thinking block, as the model
// thinks once at the start of a turn.
func checkTurnThinking(req *MessagesRequest) *apiError {
	if !req.thinking || !req.inToolLoop() {
		return nil
	}
	first := -1
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role == "user" && !toolResultsOnly(m) {
			break
		}
		if m.Role == "assistant" {
			first = i
		}
	}
	if first < 0 {
		return nil
	}
	if b := req.Messages[first].Blocks[0]; b.Type != "thinking" && b.Type != "redacted_thinking" {
		return invalid("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%s`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable `thinking`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking", first, b.Type)
	}
	return nil
}

// checkMessages checks roles, blocks and the pairing of tool_use and
// tool_result blocks.
func checkMessages(req *MessagesRequest, haveTools bool) *apiError {
	var (
		pending  []string // tool_use ids of the previous assistant message
		toolUsed bool
	)
	for i := range req.Messages {
		m := &req.Messages[i]
		switch m.Role {
		case "user", "assistant":
		default:
			return invalid("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		if i > 0 && req.Messages[i-1].Role == m.Role {
			return invalid("messages: roles must alternate between \"user\" and \"assistant\", but found multiple %q roles in a row", m.Role)
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			if s == "" {
				return invalid("messages.%d: all messages must have non-empty content except for the optional final assistant message", i)
			}
			m.Blocks = []Block{{Type: "text", Text: s}}
		} else if e := decodeStrict(m.Content, &m.Blocks, fmt.Sprintf("messages.%d.content.", i)); e != nil {
			return e
		}
		if len(m.Blocks) == 0 {
			return invalid("messages.%d: all messages must have non-empty content except for the optional final assistant message", i)
		}
		answered := map[string]bool{}
		sawOther := false
		var uses []string
		for j, b := range m.Blocks {
			at := fmt.Sprintf("messages.%d.content.%d", i, j)
			switch b.Type {
			case "text":
				if strings.TrimSpace(b.Text) == "" {
					return invalid("%s.text: text content blocks must contain non-whitespace text", at)
				}
				req.chars += utf8.RuneCountInString(b.Text)
				sawOther = true
			case "image":
				if m.Role != "user" {
					return invalid("%s.type: image blocks are only allowed in user messages", at)
				}
				sawOther = true
			case "tool_use":
				if m.Role != "assistant" {
					return invalid("%s.type: tool_use blocks are only allowed in assistant messages", at)
				}
				if !toolUseIDRE.MatchString(b.ID) {
					return invalid("%s.id: String should match pattern '^[a-zA-Z0-9_-]+$'", at)
				}
				var obj map[string]json.RawMessage
				if json.Unmarshal(b.Input, &obj) != nil || obj == nil {
					return invalid("%s.input: Input should be a valid dictionary", at)
				}
				uses = append(uses, b.ID)
				toolUsed = true
				req.chars += len(b.Name) + len(b.Input)
			case "tool_result":
				if m.Role != "user" {
					return invalid("%s.type: tool_result blocks are only allowed in user messages", at)
				}
				if sawOther {
					return invalid("%s: tool_result blocks must come first in the content of a user message, before any other block", at)
				}
				if !contains(pending, b.ToolUseID) {
					return invalid("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, b.ToolUseID)
				}
				answered[b.ToolUseID] = true
				toolUsed = true
				req.chars += utf8.RuneCountInString(b.ResultText())
			case "thinking", "redacted_thinking":
				if m.Role != "assistant" {
					return invalid("%s.type: thinking blocks are only allowed in assistant messages", at)
				}
			default:
				return invalid("%s.type: Input tag '%s' found using 'type' does not match any of the expected tags", at, b.Type)
			}
		}
		if m.Role == "user" && len(pending) > 0 {
			var missing []string
			for _, id := range pending {
				if !answered[id] {
					missing = append(missing, id)
				}
			}
			if len(missing) > 0 {
				return invalid("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i-1, strings.Join(missing, ", "))
			}
		}
		pending = nil
		if m.Role == "assistant" {
			pending = uses
		}
	}
	last := req.Messages[len(req.Messages)-1]
	if last.Role == "assistant" {
		if len(pending) > 0 {
			return invalid("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", len(req.Messages)-1, strings.Join(pending, ", "))
		}
		if b := last.Blocks[len(last.Blocks)-1]; b.Type == "text" && strings.TrimRight(b.Text, " \t\r\n") != b.Text {
			return invalid("messages: final assistant content cannot end with trailing whitespace")
		}
	}
	if toolUsed && !haveTools {
		return invalid("Requests which include `tool_use` or `tool_result` blocks must define tools.")
	}
	return nil
}

// Response types.

type message struct {
	ID           string  `json:"id"`
	Type         string  `json:"type"`
	Role         string  `json:"role"`
	Model        string  `json:"model"`
	Content      []block `json:"content"`
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        usage   `json:"usage"`
}

type block struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	Data      *string         `json:"data,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

type usage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}
