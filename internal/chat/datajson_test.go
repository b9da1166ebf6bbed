package chat

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
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
	for range 5000 {
		var v any
		if flag() {
			d := messageData{Handoff: str(), Usage: usage(), Kind: str(), Type: str(), Turn: num(), End: flag(),
				RequestID: str(), Functions: strs(), ResetTermination: flag()}
			if rng.IntN(10) == 0 {
				d.CodeResult = &CodeResult{}
			}
			v = d
		} else {
			v = selection{Agent: str(), Method: str(), Candidates: strs(), Turn: num(), Attempts: num(), Replies: strs(),
				Fallback: flag(), Usage: usage(), RequestID: str(), Routed: flag()}
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
