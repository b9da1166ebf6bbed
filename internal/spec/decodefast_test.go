package spec

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/agentd/agentd/examples"
	"github.com/agentd/agentd/internal/spec/spectest"
)

// agreesWithThorough fails t unless decodeFast, when it accepts body, gives
// what the thorough way gives, and gives up when the thorough way finds a
// problem. It reports whether decodeFast accepted the body.
func agreesWithThorough(t *testing.T, body []byte) bool {
	t.Helper()
	fast, compact, ok := decodeFast(body)
	slow, probs := thorough(body)
	if !ok {
		return false
	}
	var want bytes.Buffer
	if err := json.Compact(&want, body); err != nil || !bytes.Equal(compact, want.Bytes()) {
		t.Fatalf("decodeFast compacted\n%s\nto\n%s\njson.Compact to\n%s (%v)", body, compact, want.Bytes(), err)
	}
	if len(probs) > 0 {
		t.Fatalf("decodeFast accepted a body with problems %v:\n%s", probs, body)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("decodeFast gave\n%#v\nthe thorough way\n%#v\nfor\n%s", fast, slow, body)
	}
	return true
}

// Every example spec, and what a benchmark sends, decodes the fast way to
// exactly what the thorough way gives.
func TestDecodeFastAgreesOnTheExamples(t *testing.T) {
	names, err := fs.Glob(examples.FS, "*.json")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, name := range names {
		body, err := fs.ReadFile(examples.FS, name)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(body), `"component_type"`) {
			continue // a team file, which the server turns into a spec first
		}
		n++
		if !agreesWithThorough(t, body) {
			t.Errorf("%s: decodeFast gave up on an example spec", name)
		}
	}
	if n < 5 {
		t.Fatalf("only %d example specs", n)
	}
	for _, body := range fastSeeds {
		if !agreesWithThorough(t, []byte(body)) {
			t.Errorf("decodeFast gave up on %s", body)
		}
	}
}

// What decodeFast leaves to the thorough way (a duplicate name, a model ref
// of another kind, a number no store holds) and what it takes (nulls,
// escapes in names) decode to what the thorough way gives.
func TestDecodeSpecTakesTheThoroughWayForWhatDecodeFastLeaves(t *testing.T) {
	for _, tc := range []struct {
		body string
		fast bool
	}{
		{`{"task": "t", "name": null, "agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay"}, "system_message": null}]}`, true},
		{`{"t\u0061sk": "t", "agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay"}}]}`, true},
		{`{"task": "t", "task": "u", "agents": [{"name": "a", "type": "assistant", "model": {"provider": "replay"}}]}`, false},
		{`{"task": "t", "agents": [{"name": "a", "type": "assistant", "model": null}]}`, true},
		{`{"task": "t", "agents": [{"name": "a", "type": "assistant", "model": true}]}`, false},
		{`{"task": "t", "metadata": {"n": 1e400}}`, false},
		{`{"task": "t", "models": {"m": {"provider": "replay", "temperature": 1e400}}}`, false},
		{`{"task": "t", "max_round": 1.0}`, false},
		{`{"task": "t", "max_round": 1e1}`, false},
		{`{"task": "t", "max_round": -0}`, true},
		{`{"task": "t", "Task": "u"}`, false},
	} {
		if _, _, ok := decodeFast([]byte(tc.body)); ok != tc.fast {
			t.Errorf("decodeFast took %s: %v, want %v", tc.body, ok, tc.fast)
		}
		agreesWithThorough(t, []byte(tc.body))
		got, probs := DecodeSpec([]byte(tc.body))
		want, wantProbs := thorough([]byte(tc.body))
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(probs, wantProbs) {
			t.Errorf("DecodeSpec(%s) = %+v, %v; the thorough way %+v, %v", tc.body, got, probs, want, wantProbs)
		}
	}
}

// fastSeeds are specs that use every kind of value a spec has.
var fastSeeds = []string{
	`{"task": "t\n\"q\" \u00e9 \ud83d\ude00 \/", "max_round": 3, "agents": [{"name": "a", "type": "assistant", "model": "m", "context": {"buffer_size": 2}}],
	  "models": {"m": {"provider": "replay", "temperature": 0.5, "top_p": 1e-1, "seed": -3, "parallel_tool_calls": false,
	    "response_format": {"type": "json_object", "n": [1, 2.5e3, -0, true, null, {}]},
	    "responses": ["plain", {"content": "x", "delay_ms": 0, "usage": {"prompt_tokens": 1, "completion_tokens": 2}},
	      {"tool_calls": [{"name": "f", "arguments": {"a": [1, "b"]}}, {"name": "g"}]}]}},
	  "metadata": {"k": "v"}, "termination": {"any": [], "all": [{"max_messages": 2}, {"text_mention": {"text": "DONE"}}]}}`,
	`{"task":"t","agents":[{"name":"a","type":"assistant","model":{"provider":"replay","responses":[]}}],"speaker_selection":{"method":"round_robin"}}`,
	`{"task": "t", "agents": [{"name": "a", "type": "assistant", "model": "m", "tool_approval": ["f", "g"]},
	  {"name": "b", "type": "assistant", "model": "m", "tool_approval": "always"}, {"name": "p", "type": "user_proxy", "code_approval": true}],
	  "models": {"m": {"provider": "replay"}}, "termination": {"any": [{"external": {}}, {"max_messages": 3}]}}`,
}

func FuzzDecodeFast(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add(s)
	}
	f.Add(`{"task": "t", "agents": [{"name": "a", "type": "assistant", "model": "m"}], "models": {"m": {"provider": "replay", "responses": ["x"]}}}`)
	f.Add(`{"task": 1e400}`)
	f.Add(`{"max_round": 1.0}`)
	f.Add(`{"models": {"m": {"provider": "replay"}, "m": {"provider": "x"}}}`)
	f.Fuzz(func(t *testing.T, body string) {
		agreesWithThorough(t, []byte(body))
	})
}

// Random specs of every shape the state tests use, as JSON in two layouts,
// decode the fast way to what the thorough way gives.
func TestDecodeFastAgreesOnRandomSpecs(t *testing.T) {
	accepted := 0
	for seed := range uint64(300) {
		spec, probs := DecodeSpec([]byte(spectest.RandomSpec(rand.New(rand.NewPCG(seed, 11)))))
		if len(probs) > 0 {
			t.Fatal(probs)
		}
		spec.Task = TextTask("task <&> \u2028 \x7f é " + strconv.Itoa(int(seed)))
		body, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		var indented bytes.Buffer
		if err := json.Indent(&indented, body, "\r\n", "\t "); err != nil {
			t.Fatal(err)
		}
		for _, b := range [][]byte{body, indented.Bytes()} {
			if agreesWithThorough(t, b) {
				accepted++
			}
		}
	}
	if accepted < 500 {
		t.Fatalf("decodeFast accepted %d of 600 random specs", accepted)
	}
}

// thorough is decodeThorough as DecodeSpec answers it: no spec when there
// are problems.
func thorough(body []byte) (*Spec, []Problem) {
	d := decodeThorough(body)
	if d.probs.Len() > 0 {
		return nil, d.probs.Items()
	}
	return d.spec, nil
}
