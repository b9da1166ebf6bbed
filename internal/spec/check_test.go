package spec

import (
	"reflect"
	"strings"
	"testing"
)

// TestCheckReportsEveryProblemBehindAMisspelledField: an unknown field or
// a value of the wrong type does not hide what validation finds in the
// rest, and is not reported a second time by validation.
func TestCheckReportsEveryProblemBehindAMisspelledField(t *testing.T) {
	t.Parallel()
	body := `{"task": "x", "max_rounds": 5, "input_timeout_s": "soon",
		"agents": [{"name": "a", "type": "assistant", "model": "m", "colour": "red"},
		           {"name": 7, "type": "assistant", "model": "m"}],
		"models": {"m": {"provider": "nope", "model": "x", "temprature": 1}}}`
	_, _, got := Check([]byte(body), Limits{}, Env{Providers: []string{"openai"}})
	want := map[string]string{
		"/max_rounds":          `unknown field: did you mean "max_round"?`,
		"/agents/0/colour":     "unknown field",
		"/models/m/temprature": `unknown field: did you mean "temperature"?`,
		"/input_timeout_s":     "must be an integer",
		"/agents/1/name":       "must be a string", // and not "is required" as well
		"/models/m/provider":   `unknown provider "nope"`,
	}
	if len(got) != len(want) {
		t.Fatalf("%d problems, want %d: %v", len(got), len(want), got)
	}
	for _, p := range got {
		if w, ok := want[p.Path]; !ok || !strings.HasPrefix(p.Message, w) {
			t.Errorf("%s: %s, want %q", p.Path, p.Message, want[p.Path])
		}
	}

	// A spec without problems is what DecodeCompact gives.
	good := `{"task": "x", "agents": [{"name": "a", "type": "assistant", "model": "m"}], "models": {"m": {"provider": "replay", "responses": ["y"]}}}`
	s, compact, probs := Check([]byte(good), Limits{}, Env{})
	ws, wcompact, _ := DecodeCompact([]byte(good))
	if len(probs) > 0 || !reflect.DeepEqual(s, ws) || string(compact) != string(wcompact) {
		t.Errorf("Check(good) = %+v, %s, %v", s, compact, probs)
	}
}

// TestNearestField: a near miss is named, another word is not.
func TestNearestField(t *testing.T) {
	t.Parallel()
	fields := jsonFields(specType)
	for key, want := range map[string]string{
		"max_rounds":    "max_round",
		"Max_Round":     "max_round",
		"agent":         "agents",
		"termintion":    "termination",
		"speaker":       "",
		"colour":        "",
		"ab":            "",
		"input_timeout": "input_timeout_s",
	} {
		if got := nearestField(key, fields); got != want {
			t.Errorf("nearestField(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestSyntaxErrorSaysLineAndColumn: a body that is not JSON is placed by
// line and column, not by byte offset.
func TestSyntaxErrorSaysLineAndColumn(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		"{\n  \"task\": \"x\",\n  \"agents\": [}\n}": "body is not valid JSON: invalid character '}' looking for beginning of value at line 3, column 14",
		"{\"task\": \"x\",\n":                        "body is not valid JSON: unexpected end of input at line 2, column 1",
	} {
		_, _, probs := Check([]byte(body), Limits{}, Env{})
		if len(probs) != 1 || probs[0].Path != "" || probs[0].Message != want {
			t.Errorf("%q: %v, want %q", body, probs, want)
		}
	}
}
