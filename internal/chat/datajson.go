package chat

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/agentd/agentd/internal/chat/internal/jsonobj"
)

// encodeData encodes an event's data. The data every turn writes (a
// selection, a message's bookkeeping) is written here field by field, byte
// for byte what json.Marshal writes, at a tenth of its cost; anything else,
// or a string json.Marshal would escape, goes to json.Marshal.
func encodeData(v any) json.RawMessage {
	var o jsonobj.Writer
	switch d := v.(type) {
	case MessageData:
		if d.CodeResult != nil || d.Structured != "" || d.Reply != "" || d.Parts != nil || d.Magentic != nil || d.Thinking != nil {
			return MustJSON(v)
		}
		o.Open()
		if d.Handoff != "" {
			o.Str("handoff", d.Handoff)
		}
		if d.Condition != "" {
			o.Str("condition", d.Condition)
		}
		if d.Usage != nil {
			usage(&o, "usage", d.Usage)
		}
		if d.Thought != "" {
			o.Str("thought", d.Thought)
		}
		if d.Kind != "" {
			o.Str("kind", d.Kind)
		}
		if d.Type != "" {
			o.Str("type", d.Type)
		}
		if d.Turn != 0 {
			o.Int("turn", int64(d.Turn))
		}
		if d.End {
			o.Bool("end", true)
		}
		if d.RequestID != "" {
			o.Str("request_id", d.RequestID)
		}
		if len(d.Functions) > 0 {
			o.Strs("functions", d.Functions)
		}
		if d.ResetTermination {
			o.Bool("reset_termination", true)
		}
		if d.Stop {
			o.Bool("stop", true)
		}
		if d.Team != "" {
			o.Str("team", d.Team)
		}
	case Selection:
		o.Open()
		o.Str("agent", d.Agent)
		if len(d.Agents) > 0 {
			o.Strs("agents", d.Agents)
		}
		o.Str("method", d.Method)
		o.Strs("candidates", d.Candidates)
		o.Int("turn", int64(d.Turn))
		if d.Attempts != 0 {
			o.Int("attempts", int64(d.Attempts))
		}
		if len(d.Replies) > 0 {
			o.Strs("replies", d.Replies)
		}
		if d.Fallback {
			o.Bool("fallback", true)
		}
		if d.Usage != nil {
			usage(&o, "usage", d.Usage)
		}
		if d.RequestID != "" {
			o.Str("request_id", d.RequestID)
		}
		if d.Routed {
			o.Bool("routed", true)
		}
		if d.Team != "" {
			o.Str("team", d.Team)
		}
	default:
		return MustJSON(v)
	}
	b, ok := o.Close()
	if !ok {
		return MustJSON(v)
	}
	return b
}

// usage writes a token count as json.Marshal writes Usage.
func usage(o *jsonobj.Writer, k string, u *Usage) {
	o.Begin(k)
	o.Int("prompt_tokens", u.PromptTokens)
	o.Int("completion_tokens", u.CompletionTokens)
	o.End()
}

// MustJSON encodes one of chat's own plain structs, which cannot fail.
func MustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("marshal %T: %v", v, err)) // only our own plain structs are marshalled
	}
	return b
}

// DecodeData decodes an event's data into v; no data is the zero value.
// An event that still carries the value its data was encoded from gives
// that value.
func DecodeData[T any](e Event, v *T) error {
	if t, ok := e.typed.(T); ok {
		*v = t
		return nil
	}
	if len(e.Data) == 0 {
		return nil
	}
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("decode data: %w", err)
	}
	return nil
}

// WithData is e with data v: encoded for the log, and kept as it is for the
// worker's fold when decoding the encoding gives v back. That is so for the
// values folded from typed events (plain fields, strings and ints, no
// times), except for text the encoding mended: invalid UTF-8 (written as
// \ufffd) and NUL (\u0000, which storable mends once more).
func WithData(e Event, v any) Event {
	e.Data = encodeData(v)
	if !bytes.Contains(e.Data, []byte(`\ufffd`)) && !bytes.Contains(e.Data, []byte(`\u0000`)) {
		e.typed = v
	}
	return e
}

// Untyped drops the values withData kept, before events leave the worker,
// and returns evs.
func Untyped(evs []Event) []Event {
	for i := range evs {
		evs[i].typed = nil
	}
	return evs
}
