package chat

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/agentd/agentd/internal/spec"
)

// encodeData writes what json.Marshal writes, byte for byte, for random
// selections and message data, strings that need escaping included.
func TestEncodeDataIsJSONMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	words := []string{"", "a", "coder", "round_robin", "<b>", "x&y", `q"`, `b\s`, "é", "\u2028", "tab\t", "\x7f", "~/"}
	str := func() string { return words[rng.IntN(len(words))] }
	strs := func() []string {
		switch rng.IntN(3) {
		case 0:
			return nil
		case 1:
			return []string{}
		}
		out := make([]string, 1+rng.IntN(3))
		for i := range out {
			out[i] = str()
		}
		return out
	}
	usage := func() *Usage {
		if rng.IntN(2) == 0 {
			return nil
		}
		return &Usage{PromptTokens: rng.Int64N(1 << 40), CompletionTokens: -rng.Int64N(5)}
	}
	num := func() int { return rng.IntN(5) - 1 }
	flag := func() bool { return rng.IntN(2) == 0 }
	// Every field is set, by its type: a field added to either struct and
	// forgotten by encodeData fails here.
	fill := func(v reflect.Value) {
		for i := range v.NumField() {
			f := v.Field(i)
			if !v.Type().Field(i).IsExported() || v.Type().Field(i).Tag.Get("json") == "-" {
				continue // derived by the fold, never encoded
			}
			switch f.Interface().(type) {
			case string:
				f.SetString(str())
			case int:
				f.SetInt(int64(num()))
			case bool:
				f.SetBool(flag())
			case []string:
				f.Set(reflect.ValueOf(strs()))
			case *Usage:
				f.Set(reflect.ValueOf(usage()))
			case *CodeResult:
				if rng.IntN(10) == 0 {
					f.Set(reflect.ValueOf(&CodeResult{}))
				}
			case *MagenticData:
				if rng.IntN(10) == 0 {
					f.Set(reflect.ValueOf(&MagenticData{Step: str(), Ledger: str()}))
				}
			case []ThinkingBlock:
				if rng.IntN(10) == 0 {
					f.Set(reflect.ValueOf([]ThinkingBlock{{Type: "thinking", Thinking: str(), Signature: str()}, {Type: "redacted_thinking", Data: str()}}))
				}
			case []spec.Part:
				if rng.IntN(10) == 0 {
					f.Set(reflect.ValueOf([]spec.Part{{Text: str()}, {Image: &spec.ImagePart{Data: []byte(str()), MediaType: "image/png"}}}))
				}
			default:
				t.Fatalf("field %s of %s: no random values of type %s", v.Type().Field(i).Name, v.Type(), f.Type())
			}
		}
	}
	for range 5000 {
		var v any
		if flag() {
			var d MessageData
			fill(reflect.ValueOf(&d).Elem())
			v = d
		} else {
			var sel Selection
			fill(reflect.ValueOf(&sel).Elem())
			v = sel
		}
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := encodeData(v); !bytes.Equal(got, want) {
			t.Fatalf("encodeData(%#v) =\n%s\njson.Marshal gives\n%s", v, got, want)
		}
	}
}

// TestEncodeDataPlainMessage: the fast path itself, for a message whose
// every string needs no escape (the random test above mostly takes the
// slow one: one escaped string among the fields is enough).
func TestEncodeDataPlainMessage(t *testing.T) {
	d := MessageData{Handoff: "escalation", Condition: "severity >= 8", Kind: KindHandoff, Turn: 2, End: true,
		Usage: &Usage{PromptTokens: 3}, Thought: "t", Type: "HandoffMessage", RequestID: "r", Functions: []string{"f"}, Stop: true, Team: "x"}
	want, _ := json.Marshal(d)
	if got := encodeData(d); !bytes.Equal(got, want) {
		t.Fatalf("encodeData =\n%s\njson.Marshal gives\n%s", got, want)
	}
}

// A worker folds its own events from the values they were encoded from,
// unless the encoding changed them: then it decodes, as a worker that reads
// the log does.
func TestWithDataKeepsOnlyWhatDecodesTheSame(t *testing.T) {
	for _, c := range []struct {
		out  string
		kept bool
	}{{"fine <ok> & done", true}, {"bad \xff byte", false}, {"nul \x00 char", false}} {
		e := Storable(WithData(Event{Type: EventMessage}, MessageData{Kind: KindAuto, CodeResult: &CodeResult{Output: c.out}}))
		if (e.typed != nil) != c.kept {
			t.Errorf("%q: typed kept = %v, want %v", c.out, e.typed != nil, c.kept)
		}
		var typed, decoded MessageData
		if err := DecodeData(e, &typed); err != nil {
			t.Fatal(err)
		}
		e.typed = nil
		if err := DecodeData(e, &decoded); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(typed, decoded) {
			t.Errorf("%q: folded %+v, the log gives %+v", c.out, typed.CodeResult, decoded.CodeResult)
		}
	}
}
