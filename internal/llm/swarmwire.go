package llm

import (
	"encoding/json"
	"fmt"

	openai "github.com/sashabaranov/go-openai"

	"github.com/agentd/agentd/internal/chat"
)

// OpenAI Swarm's run loop (openai/swarm, core.py) sends its history as it
// keeps it: each reply as the client library dumps it, with the agent that
// made it as "sender", each tool result with the function's name as
// "tool_name", and its tools as function_to_json writes them (a
// description, empty or not, and no strict), without tool_choice.
// go-openai's message and tool types have no place for the extra fields
// and drop an empty description, so the body go-openai encodes for such a
// request is rewritten on its way out (headerDoer): its messages and tools
// are replaced, everything else (the model's options, stream) stays.

// swarmMessage is one message of Swarm's history.
type swarmMessage struct {
	Role string `json:"role"`
	// Content is a string, null (a reply that only calls tools) or, for a
	// user message with images, go-openai's parts.
	Content    any             `json:"content"`
	ToolCalls  []swarmToolCall `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	ToolName   string          `json:"tool_name,omitempty"`
	Sender     string          `json:"sender,omitempty"`
}

type swarmToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// swarmTool is a function as Swarm's function_to_json describes it.
type swarmTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// swarmRewrite returns the rewrite of a request body that gives it
// Swarm's messages and tools.
func swarmRewrite(req *chat.ModelRequest) (func([]byte) ([]byte, error), error) {
	msgs := make([]swarmMessage, 0, len(req.Messages))
	for i, m := range req.Messages {
		sm := swarmMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, ToolName: m.ToolName(), Sender: m.Sender()}
		switch {
		case m.Role == chat.RoleAssistant && m.Content == "":
			sm.Content = nil
		case len(m.Parts()) > 0:
			om, err := convertMessage(chat.ModelMessage{Role: m.Role, More: &chat.ModelMore{Parts: m.Parts()}})
			if err != nil {
				return nil, fmt.Errorf("message %d: %w", i, err)
			}
			sm.Content = om.MultiContent
		}
		for _, c := range m.ToolCalls {
			var tc swarmToolCall
			tc.ID, tc.Type = c.ID, string(openai.ToolTypeFunction)
			tc.Function.Name, tc.Function.Arguments = c.Function.Name, c.Function.Arguments
			sm.ToolCalls = append(sm.ToolCalls, tc)
		}
		msgs = append(msgs, sm)
	}
	rawMsgs, err := json.Marshal(msgs)
	if err != nil {
		return nil, err
	}
	var rawTools json.RawMessage
	if len(req.Tools) > 0 {
		tools := make([]swarmTool, len(req.Tools))
		for i, t := range req.Tools {
			tools[i].Type = string(openai.ToolTypeFunction)
			tools[i].Function.Name, tools[i].Function.Description, tools[i].Function.Parameters = t.Name, t.Description, t.Parameters
		}
		if rawTools, err = json.Marshal(tools); err != nil {
			return nil, err
		}
	}
	return func(body []byte) ([]byte, error) {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(body, &fields); err != nil {
			return nil, err
		}
		fields["messages"] = rawMsgs
		if rawTools != nil {
			fields["tools"] = rawTools
		}
		// Swarm's agents send tool_choice null unless a program sets one.
		delete(fields, "tool_choice")
		return json.Marshal(fields)
	}, nil
}
