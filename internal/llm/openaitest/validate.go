package openaitest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	_ "image/gif"  // images of image_url parts
	_ "image/jpeg" // images of image_url parts
	_ "image/png"  // images of image_url parts
	"slices"
	"strings"
)

// validName reports whether s matches ^[a-zA-Z0-9_-]{1,64}$, what the API
// accepts as a message or function name.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// knownParam reports whether k is a chat-completions request parameter. The
// real API rejects any other top-level key, which catches misspelt options.
func knownParam(k string) bool {
	switch k {
	case "model", "messages", "audio", "frequency_penalty", "function_call", "functions", "logit_bias",
		"logprobs", "max_completion_tokens", "max_tokens", "metadata", "modalities", "n",
		"parallel_tool_calls", "prediction", "presence_penalty", "prompt_cache_key", "reasoning_effort",
		"response_format", "safety_identifier", "seed", "service_tier", "stop", "store", "stream",
		"stream_options", "temperature", "tool_choice", "tools", "top_logprobs", "top_p", "user",
		"verbosity", "web_search_options":
		return true
	}
	return false
}

// parseRequest decodes and validates a request body the way the API does,
// returning the first problem as a 400 with an OpenAI-style error. The
// checks are the ones a client such as agentd can get wrong: the tool-call
// sequence, names, required fields, parameter ranges and combinations.
func parseRequest(body []byte) (*ChatRequest, *apiError) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(body, &keys); err != nil || keys == nil {
		return nil, invalid("", "", "We could not parse the JSON body of your request. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.")
	}
	for k := range keys {
		if !knownParam(k) {
			return nil, invalid(k, "unknown_parameter", "Unrecognized request argument supplied: %s", k)
		}
	}
	var req ChatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			return nil, invalid(te.Field, "invalid_type", "Invalid type for '%s': expected %s, but got %s instead.", te.Field, te.Type, te.Value)
		}
		return nil, invalid("", "", "We could not parse the JSON body of your request: %v", err)
	}
	if req.Model == "" {
		return nil, invalid("", "", "you must provide a model parameter")
	}
	if _, ok := keys["messages"]; !ok {
		return nil, invalid("messages", "missing_required_parameter", "Missing required parameter: 'messages'.")
	}
	if len(req.Messages) == 0 {
		return nil, invalid("messages", "empty_array", "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	}
	for i, m := range req.Messages {
		if e := checkMessage(i, m); e != nil {
			return nil, e
		}
	}
	if e := checkToolSequence(req.Messages); e != nil {
		return nil, e
	}
	for i, t := range req.Tools {
		if e := checkTool(i, t); e != nil {
			return nil, e
		}
	}
	if e := checkOptions(&req, keys); e != nil {
		return nil, e
	}
	return &req, nil
}

func checkMessage(i int, m Message) *apiError {
	p := func(field string) string { return fmt.Sprintf("messages[%d].%s", i, field) }
	switch m.Role {
	case "system", "developer", "user", "assistant", "tool":
	case "":
		return invalid(p("role"), "missing_required_parameter", "Missing required parameter: '%s'.", p("role"))
	default:
		return invalid(p("role"), "invalid_value", "Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'tool', 'developer'.", m.Role)
	}
	if m.Name != "" && !validName(m.Name) {
		return invalid(p("name"), "invalid_value", "Invalid '%s': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]{1,64}$'.", p("name"))
	}
	if e := checkContent(p("content"), m); e != nil {
		return e
	}
	if m.Role == "tool" && m.ToolCallID == "" {
		return invalid(p("tool_call_id"), "missing_required_parameter", "Missing required parameter: '%s'.", p("tool_call_id"))
	}
	if m.Role != "assistant" && len(m.ToolCalls) > 0 {
		return invalid(p("tool_calls"), "unknown_parameter", "Unrecognized request argument supplied: %s", p("tool_calls"))
	}
	for j, tc := range m.ToolCalls {
		q := func(field string) string { return fmt.Sprintf("messages[%d].tool_calls[%d].%s", i, j, field) }
		switch {
		case tc.ID == "":
			return invalid(q("id"), "missing_required_parameter", "Missing required parameter: '%s'.", q("id"))
		case tc.Type != "function":
			return invalid(q("type"), "invalid_value", "Invalid value: '%s'. Supported values are: 'function'.", tc.Type)
		case tc.Function.Name == "":
			return invalid(q("function.name"), "missing_required_parameter", "Missing required parameter: '%s'.", q("function.name"))
		case tc.Function.Arguments == nil:
			return invalid(q("function.arguments"), "missing_required_parameter", "Missing required parameter: '%s'.", q("function.arguments"))
		}
	}
	return nil
}

// checkContent: content is required except on an assistant message that
// calls tools, and must be a string or a non-empty array of parts.
func checkContent(param string, m Message) *apiError {
	c := bytes.TrimSpace(m.Content)
	if len(c) == 0 || string(c) == "null" {
		if m.Role == "assistant" && len(m.ToolCalls) > 0 {
			return nil
		}
		if len(c) == 0 {
			return invalid(param, "missing_required_parameter", "Missing required parameter: '%s'.", param)
		}
		return invalid(param, "invalid_type", "Invalid value for 'content': expected a string, got null.")
	}
	switch c[0] {
	case '"':
		return nil
	case '[':
		var parts []map[string]json.RawMessage
		if json.Unmarshal(c, &parts) != nil {
			return invalid(param, "invalid_type", "Invalid type for '%s': expected an array of content parts.", param)
		}
		if len(parts) == 0 {
			return invalid(param, "empty_array", "Invalid '%s': empty array. Expected an array with minimum length 1, but got an empty array instead.", param)
		}
		for k, part := range parts {
			if e := checkPart(fmt.Sprintf("%s[%d]", param, k), m.Role, part); e != nil {
				return e
			}
		}
		return nil
	default:
		return invalid(param, "invalid_type", "Invalid type for '%s': expected one of a string or array of objects, but got %s instead.", param, jsonKind(c))
	}
}

func jsonKind(v []byte) string {
	switch v[0] {
	case '{':
		return "an object"
	case 't', 'f':
		return "a boolean"
	default:
		return "a number"
	}
}

// checkToolSequence enforces the API's pairing of tool calls and tool
// messages: an assistant message with tool_calls must be followed, directly,
// by one tool message per call id, and a tool message must answer a call of
// that assistant message.
func checkToolSequence(msgs []Message) *apiError {
	var (
		owner   = -1            // index of the assistant message whose calls are being answered
		pending map[string]bool // its call ids; true until answered
	)
	missing := func() *apiError {
		var ids []string
		for id, open := range pending {
			if open {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		slices.Sort(ids)
		return invalid(fmt.Sprintf("messages.[%d].role", owner), "",
			"An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s",
			strings.Join(ids, ", "))
	}
	for i, m := range msgs {
		if m.Role == "tool" {
			if owner < 0 {
				return invalid(fmt.Sprintf("messages.[%d].role", i), "",
					"Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.")
			}
			open, ok := pending[m.ToolCallID]
			if !ok {
				return invalid(fmt.Sprintf("messages.[%d].tool_call_id", i), "",
					"Invalid parameter: 'tool_call_id' of '%s' not found in 'tool_calls' of previous message.", m.ToolCallID)
			}
			if !open {
				return invalid(fmt.Sprintf("messages.[%d].tool_call_id", i), "",
					"Invalid parameter: 'tool_call_id' of '%s' was already answered by an earlier tool message.", m.ToolCallID)
			}
			pending[m.ToolCallID] = false
			continue
		}
		if e := missing(); e != nil {
			return e
		}
		owner, pending = -1, nil
		if m.Role == "assistant" && len(m.ToolCalls) > 0 {
			owner, pending = i, map[string]bool{}
			for _, tc := range m.ToolCalls {
				pending[tc.ID] = true
			}
		}
	}
	return missing()
}

func checkTool(i int, t Tool) *apiError {
	p := func(field string) string { return fmt.Sprintf("tools[%d].%s", i, field) }
	if t.Type != "function" {
		return invalid(p("type"), "invalid_value", "Invalid value: '%s'. Supported values are: 'function' and 'custom'.", t.Type)
	}
	if t.Function == nil {
		return invalid(p("function"), "missing_required_parameter", "Missing required parameter: '%s'.", p("function"))
	}
	if !validName(t.Function.Name) {
		return invalid(p("function.name"), "invalid_value", "Invalid '%s': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]{1,64}$'.", p("function.name"))
	}
	if params := bytes.TrimSpace(t.Function.Parameters); len(params) > 0 && params[0] != '{' {
		return invalid(p("function.parameters"), "invalid_type", "Invalid type for '%s': expected an object, but got %s instead.", p("function.parameters"), jsonKind(params))
	}
	return nil
}

func checkOptions(req *ChatRequest, keys map[string]json.RawMessage) *apiError {
	if t := req.Temperature; t != nil && (*t < 0 || *t > 2) {
		return invalid("temperature", "decimal_out_of_range", "Invalid 'temperature': expected a value between 0 and 2, but got %v instead.", *t)
	}
	if t := req.TopP; t != nil && (*t < 0 || *t > 1) {
		return invalid("top_p", "decimal_out_of_range", "Invalid 'top_p': expected a value between 0 and 1, but got %v instead.", *t)
	}
	if req.ParallelToolCalls != nil && len(req.Tools) == 0 {
		return invalid("parallel_tool_calls", "invalid_value", "Invalid value for 'parallel_tool_calls': 'parallel_tool_calls' is only allowed when 'tools' are specified.")
	}
	if _, ok := keys["stream_options"]; ok && !req.Stream && string(keys["stream_options"]) != "null" {
		return invalid("stream_options", "invalid_value", "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
	}
	if len(req.ResponseFormat) > 0 && string(req.ResponseFormat) != "null" {
		var rf struct {
			Type       string `json:"type"`
			JSONSchema *struct {
				Name string `json:"name"`
			} `json:"json_schema"`
		}
		if json.Unmarshal(req.ResponseFormat, &rf) != nil {
			return invalid("response_format", "invalid_type", "Invalid type for 'response_format': expected an object.")
		}
		switch rf.Type {
		case "text":
		case "json_object":
			if !mentionsJSON(req.Messages) {
				return invalid("messages", "", "'messages' must contain the word 'json' in some form, to use 'response_format' of type 'json_object'.")
			}
		case "json_schema":
			if rf.JSONSchema == nil {
				return invalid("response_format.json_schema", "missing_required_parameter", "Missing required parameter: 'response_format.json_schema'.")
			}
			if rf.JSONSchema.Name == "" {
				return invalid("response_format.json_schema.name", "missing_required_parameter", "Missing required parameter: 'response_format.json_schema.name'.")
			}
		default:
			return invalid("response_format.type", "invalid_value", "Invalid value: '%s'. Supported values are: 'json_object', 'json_schema', and 'text'.", rf.Type)
		}
	}
	return nil
}

func mentionsJSON(msgs []Message) bool {
	for _, m := range msgs {
		if strings.Contains(strings.ToLower(m.Text()), "json") {
			return true
		}
	}
	return false
}

// checkPart checks one content part as the API does: a text part on any
// message, an image_url part on a user message only, with a url that is
// http(s) or a base64 data URL of a PNG, JPEG, GIF or WebP image that
// decodes, and a detail of auto, low or high.
func checkPart(pp, role string, part map[string]json.RawMessage) *apiError {
	var typ string
	_ = json.Unmarshal(part["type"], &typ)
	allowed := []string{"type", "text"}
	switch {
	case typ == "text":
		var text string
		if json.Unmarshal(part["text"], &text) != nil {
			return invalid(pp+".text", "missing_required_parameter", "Missing required parameter: '%s.text'.", pp)
		}
	case typ == "image_url" && role == "user":
		allowed = []string{"type", "image_url"}
		var img map[string]json.RawMessage
		if json.Unmarshal(part["image_url"], &img) != nil || img == nil {
			return invalid(pp+".image_url", "missing_required_parameter", "Missing required parameter: '%s.image_url'.", pp)
		}
		for k := range img {
			if k != "url" && k != "detail" {
				return invalid(pp+".image_url."+k, "unknown_parameter", "Unknown parameter: '%s.image_url.%s'.", pp, k)
			}
		}
		var url, detail string
		if json.Unmarshal(img["url"], &url) != nil {
			return invalid(pp+".image_url.url", "missing_required_parameter", "Missing required parameter: '%s.image_url.url'.", pp)
		}
		if d, ok := img["detail"]; ok && (json.Unmarshal(d, &detail) != nil || !slices.Contains([]string{"auto", "low", "high"}, detail)) {
			return invalid(pp+".image_url.detail", "invalid_value", "Invalid value: '%s'. Supported values are: 'auto', 'low', and 'high'.", detail)
		}
		if e := checkImageURL(pp+".image_url.url", url); e != nil {
			return e
		}
	case typ == "image_url":
		return invalid(pp+".type", "invalid_value", "Invalid value: 'image_url'. Supported values are: 'text'.")
	default:
		return invalid(pp+".type", "invalid_value", "Invalid value: '%s'. Supported values are: 'text', 'image_url', 'input_audio', 'refusal', 'audio', and 'file'.", typ)
	}
	for k := range part {
		if !slices.Contains(allowed, k) {
			return invalid(pp+"."+k, "unknown_parameter", "Unknown parameter: '%s.%s'.", pp, k)
		}
	}
	return nil
}

// checkImageURL: an http(s) URL, or a data URL whose media type is an
// image type the API reads and whose base64 payload is that image.
func checkImageURL(param, url string) *apiError {
	if strings.HasPrefix(url, "https://") || strings.HasPrefix(url, "http://") {
		return nil
	}
	rest, ok := strings.CutPrefix(url, "data:")
	mediaType, payload, ok2 := strings.Cut(rest, ";base64,")
	if !ok || !ok2 {
		return invalid(param, "invalid_image_url", "Invalid image URL: '%s'. Expected a base64-encoded data URL with an image MIME type (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got unsupported MIME type.", param)
	}
	if !slices.Contains([]string{"image/png", "image/jpeg", "image/gif", "image/webp"}, mediaType) {
		return invalid(param, "invalid_image_format", "Invalid MIME type. Only image types are supported.")
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return invalid(param, "invalid_base64", "Invalid base64 image_url.")
	}
	if mediaType != "image/webp" {
		_, format, err := image.DecodeConfig(bytes.NewReader(data))
		if err != nil || "image/"+format != mediaType {
			return invalid(param, "invalid_image_format", "You uploaded an unsupported image. Please make sure your image is valid.")
		}
	}
	return nil
}
