package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// decodeFast decodes a spec in one pass over the body, straight into Go
// values, when there is nothing in it to report. Every create decodes a
// spec, and DecodeSpec's thorough way (a generic decode to find every
// problem with its path, then json.Unmarshal) costs several times as much
// (BenchmarkDecodeSpec). The pass is encoding/json/v2's
// (github.com/go-json-experiment/json): strict where DecodeSpec is strict
// (unknown fields, values of the wrong type, invalid UTF-8; duplicate
// names too), but it stops at the first problem, so it cannot be the only
// decoder: the thorough way is what lists every problem with its path.
//
// It gives up (ok is false) at the first thing DecodeSpec could report,
// and at what it leaves to the thorough way (a duplicate name, a model ref
// that is neither a name nor an object); DecodeSpec then decodes the body
// its thorough way and says what is wrong. So for a body it accepts it must
// give exactly what json.Unmarshal gives: FuzzDecodeFast checks that
// against the thorough way.
//
// It also returns the body compacted, as json.Compact makes it: what is
// stored and hashed. That is body itself when it holds no whitespace
// between tokens.
func decodeFast(body []byte) (*Spec, []byte, bool) {
	// What storableProblems refuses and the decoder does not: a NUL can only
	// come from an escape, as JSON strings hold no raw control characters.
	if !utf8.Valid(body) || bytes.Contains(body, []byte(`\u0000`)) || loneSurrogate(body) {
		return nil, nil, false
	}
	var s Spec
	if err := jsonv2.Unmarshal(body, &s, fastOptions); err != nil {
		return nil, nil, false
	}
	return &s, compact(body), true
}

// compact returns valid JSON text without whitespace between tokens, as
// json.Compact makes it (which scans byte by byte, at twice the cost of
// the whole decode): body itself when it holds none.
func compact(b []byte) []byte {
	var out []byte
	kept := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = stringEnd(b, i)
		case ' ', '\t', '\n', '\r':
			if out == nil {
				out = make([]byte, 0, len(b))
			}
			out = append(out, b[kept:i]...)
			for i+1 < len(b) && (b[i+1] == ' ' || b[i+1] == '\t' || b[i+1] == '\n' || b[i+1] == '\r') {
				i++
			}
			kept = i + 1
		}
	}
	if out == nil {
		return b
	}
	return append(out, b[kept:]...)
}

// stringEnd returns the index of the closing quote of the JSON string that
// opens at b[i], in valid JSON text.
func stringEnd(b []byte, i int) int {
	for i++; b[i] != '"'; i++ {
		if b[i] == '\\' {
			i++
		}
	}
	return i
}

// fastOptions make encoding/json/v2 refuse what DecodeSpec refuses, and
// decode the types with their own JSON forms as their UnmarshalJSON
// methods do.
var fastOptions = jsonv2.JoinOptions(
	jsonv2.RejectUnknownMembers(true),
	jsonv2.WithUnmarshalers(jsonv2.JoinUnmarshalers(
		jsonv2.UnmarshalFromFunc(unmarshalModelRef),
		jsonv2.UnmarshalFromFunc(unmarshalMessageContent),
		jsonv2.UnmarshalFromFunc(unmarshalToolApproval),
		jsonv2.UnmarshalFromFunc(unmarshalReplayResponse),
		jsonv2.UnmarshalFromFunc(unmarshalRawMessage),
		jsonv2.UnmarshalFromFunc(unmarshalHandoff),
	)),
)

// errThorough makes decodeFast leave a body to the thorough way.
var errThorough = errors.New("left to the thorough way")

// unmarshalModelRef is ModelRef.UnmarshalJSON: a name or a model object.
func unmarshalModelRef(dec *jsontext.Decoder, r *ModelRef) error {
	switch dec.PeekKind() {
	case '"':
		tok, err := dec.ReadToken()
		r.Name = tok.String()
		return err
	case '{':
		r.Inline = new(Model)
		return jsonv2.UnmarshalDecode(dec, r.Inline)
	}
	return errThorough
}

// unmarshalToolApproval is ToolApproval.UnmarshalJSON: a mode or a list of
// tool names.
func unmarshalToolApproval(dec *jsontext.Decoder, t *ToolApproval) error {
	switch dec.PeekKind() {
	case '"':
		tok, err := dec.ReadToken()
		t.Mode = tok.String()
		return err
	case '[':
		return jsonv2.UnmarshalDecode(dec, &t.Tools)
	}
	return errThorough
}

// unmarshalHandoff is Handoff.UnmarshalJSON: a target's name or a
// hand-off object.
func unmarshalHandoff(dec *jsontext.Decoder, h *Handoff) error {
	switch dec.PeekKind() {
	case '"':
		tok, err := dec.ReadToken()
		*h = Handoff{Target: tok.String(), short: true}
		return err
	case '{':
		type plain Handoff // without this function
		return jsonv2.UnmarshalDecode(dec, (*plain)(h))
	}
	return errThorough
}

// unmarshalReplayResponse is ReplayResponse.UnmarshalJSON: a string is the
// content, an object the whole response.
func unmarshalReplayResponse(dec *jsontext.Decoder, r *ReplayResponse) error {
	if dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		*r = ReplayResponse{Content: tok.String()}
		return err
	}
	type plain ReplayResponse // without this function
	return jsonv2.UnmarshalDecode(dec, (*plain)(r))
}

// unmarshalRawMessage is json.RawMessage.UnmarshalJSON, checking what
// storableProblems checks of the value: its numbers fit a float64.
func unmarshalRawMessage(dec *jsontext.Decoder, m *json.RawMessage) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	if !numbersFit(v) {
		return errThorough
	}
	*m = append((*m)[:0], v...)
	return nil
}

// numbersFit reports whether every number of a valid JSON value parses as a
// float64.
func numbersFit(v []byte) bool {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			i = stringEnd(v, i)
		case c == '-' || c >= '0' && c <= '9':
			j := i
			for i < len(v) && bytes.IndexByte([]byte("+-.0123456789eE"), v[i]) >= 0 {
				i++
			}
			if _, err := strconv.ParseFloat(string(v[j:i]), 64); err != nil {
				return false
			}
			i--
		}
	}
	return true
}

// unmarshalMessageContent is MessageContent.UnmarshalJSON: a text, or a
// list of parts (images are rare enough to take encoding/json's way).
func unmarshalMessageContent(dec *jsontext.Decoder, c *MessageContent) error {
	switch dec.PeekKind() {
	case '"':
		tok, err := dec.ReadToken()
		*c = MessageContent{Text: tok.String()}
		return err
	case '[':
		v, err := dec.ReadValue()
		if err != nil {
			return err
		}
		if c.UnmarshalJSON(v) != nil {
			return errThorough
		}
		return nil
	}
	return errThorough
}
