package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// encodeData encodes an event's data. The data every turn writes (a
// selection, a message's bookkeeping) is written here field by field, byte
// for byte what json.Marshal writes, at a tenth of its cost; anything else,
// or a string json.Marshal would escape, goes to json.Marshal.
func encodeData(v any) json.RawMessage {
	o := jsonObject{ok: true}
	switch d := v.(type) {
	case MessageData:
		if d.CodeResult != nil || d.Structured != "" || d.Reply != "" || d.Parts != nil || d.Magentic != nil || d.Thinking != nil {
			return MustJSON(v)
		}
		o.open()
		if d.Handoff != "" {
			o.str("handoff", d.Handoff)
		}
		if d.Condition != "" {
			o.str("condition", d.Condition)
		}
		if d.Usage != nil {
			o.usage("usage", d.Usage)
		}
		if d.Thought != "" {
			o.str("thought", d.Thought)
		}
		if d.Kind != "" {
			o.str("kind", d.Kind)
		}
		if d.Type != "" {
			o.str("type", d.Type)
		}
		if d.Turn != 0 {
			o.int("turn", int64(d.Turn))
		}
		if d.End {
			o.bool("end", true)
		}
		if d.RequestID != "" {
			o.str("request_id", d.RequestID)
		}
		if len(d.Functions) > 0 {
			o.strs("functions", d.Functions)
		}
		if d.ResetTermination {
			o.bool("reset_termination", true)
		}
		if d.Stop {
			o.bool("stop", true)
		}
		if d.Team != "" {
			o.str("team", d.Team)
		}
	case Selection:
		o.open()
		o.str("agent", d.Agent)
		if len(d.Agents) > 0 {
			o.strs("agents", d.Agents)
		}
		o.str("method", d.Method)
		o.strs("candidates", d.Candidates)
		o.int("turn", int64(d.Turn))
		if d.Attempts != 0 {
			o.int("attempts", int64(d.Attempts))
		}
		if len(d.Replies) > 0 {
			o.strs("replies", d.Replies)
		}
		if d.Fallback {
			o.bool("fallback", true)
		}
		if d.Usage != nil {
			o.usage("usage", d.Usage)
		}
		if d.RequestID != "" {
			o.str("request_id", d.RequestID)
		}
		if d.Routed {
			o.bool("routed", true)
		}
		if d.Team != "" {
			o.str("team", d.Team)
		}
	default:
		return MustJSON(v)
	}
	if !o.ok {
		return MustJSON(v)
	}
	return append(o.b, '}')
}

// jsonObject writes a JSON object; ok turns false at a string that needs
// escaping.
type jsonObject struct {
	b      []byte
	ok     bool
	fields int
}

func (o *jsonObject) open() { o.b = append(make([]byte, 0, 128), '{') }

func (o *jsonObject) key(k string) {
	if o.fields > 0 {
		o.b = append(o.b, ',')
	}
	o.fields++
	o.b = append(o.b, '"')
	o.b = append(o.b, k...)
	o.b = append(o.b, '"', ':')
}

func (o *jsonObject) str(k, v string) {
	o.key(k)
	o.quote(v)
}

// quote writes v quoted if json.Marshal would write it as it is: printable
// ASCII without the quote, the backslash and what it escapes for HTML.
func (o *jsonObject) quote(v string) {
	for i := range len(v) {
		switch c := v[i]; {
		case c < 0x20 || c >= 0x7f, c == '"', c == '\\', c == '<', c == '>', c == '&':
			o.ok = false
			return
		}
	}
	o.b = append(o.b, '"')
	o.b = append(o.b, v...)
	o.b = append(o.b, '"')
}

func (o *jsonObject) int(k string, v int64) {
	o.key(k)
	o.b = strconv.AppendInt(o.b, v, 10)
}

func (o *jsonObject) bool(k string, v bool) {
	o.key(k)
	o.b = strconv.AppendBool(o.b, v)
}

// strs writes a list of strings; nil is null, as json.Marshal has it.
func (o *jsonObject) strs(k string, vs []string) {
	o.key(k)
	if vs == nil {
		o.b = append(o.b, "null"...)
		return
	}
	o.b = append(o.b, '[')
	for i, v := range vs {
		if i > 0 {
			o.b = append(o.b, ',')
		}
		o.quote(v)
	}
	o.b = append(o.b, ']')
}

func (o *jsonObject) usage(k string, u *Usage) {
	o.key(k)
	o.b = append(o.b, `{"prompt_tokens":`...)
	o.b = strconv.AppendInt(o.b, u.PromptTokens, 10)
	o.b = append(o.b, `,"completion_tokens":`...)
	o.b = strconv.AppendInt(o.b, u.CompletionTokens, 10)
	o.b = append(o.b, '}')
}

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
