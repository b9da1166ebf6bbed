package varexpr

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCompileRefuses(t *testing.T) {
	t.Parallel()
	names := []string{"severity", "tier", "not an identifier"}
	for _, tc := range []struct{ src, want string }{
		{"severity >=", "invalid expression: 1:12: Syntax error"},
		{"severity + 1", "must be a boolean expression (this one is of type int)"},
		{"tier", "must be a boolean expression (this one is of type dyn)"},
		{"priority > 3", "undeclared reference to 'priority'"},
		{"priority > 3", "declared: severity, tier)"},
		{"", "must not be empty"},
		{strings.Repeat("(", 200) + "true" + strings.Repeat(")", 200), "nests too deep"},
		{strings.Repeat("a", MaxBytes+1), "must be at most 4096 bytes"},
	} {
		_, err := Compile(tc.src, names)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Compile(%.40q) = %v, want an error containing %q", tc.src, err, tc.want)
		}
	}
}

func TestHolds(t *testing.T) {
	t.Parallel()
	vars := map[string]json.RawMessage{
		"severity": json.RawMessage(`9`), "ratio": json.RawMessage(`8.0`), "tier": json.RawMessage(`"gold"`),
		"tags": json.RawMessage(`["a","b"]`), "order": json.RawMessage(`{"id": 7, "items": [1, 2]}`),
		"none": json.RawMessage(`null`), "big": json.RawMessage(`1e300`),
	}
	names := []string{"severity", "ratio", "tier", "tags", "order", "none", "big", "missing"}
	for _, tc := range []struct {
		src     string
		want    bool
		wantErr bool
	}{
		{src: "severity >= 8", want: true},
		{src: `severity >= 8 && tier == "gold"`, want: true},
		{src: `severity >= 10 || tier != "gold"`, want: false},
		{src: "ratio == 8", want: true},
		{src: "ratio >= 7.5", want: true},
		{src: `"b" in tags`, want: true},
		{src: "order.id == 7 && size(order.items) == 2", want: true},
		{src: "none == null", want: true},
		{src: "big > 1e299", want: true},
		{src: "missing > 3", wantErr: true},
		{src: "tier > 3", wantErr: true},
		{src: "none > 3", wantErr: true},
		{src: "severity / 0 == 1", wantErr: true},
	} {
		p, err := Compile(tc.src, names)
		if err != nil {
			t.Fatalf("Compile(%q): %v", tc.src, err)
		}
		got, err := p.Holds(vars)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("%q holds = %v, %v; want %v (error: %v)", tc.src, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestIdentifier(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{"severity": true, "_x1": true, "x-y": false, "1x": false, "in": false, "null": false, "": false, "naïve": false} {
		if got := Identifier(name); got != want {
			t.Errorf("Identifier(%q) = %v, want %v", name, got, want)
		}
	}
}

// FuzzCompile: no expression makes Compile or a compiled program's
// evaluation panic, and a program holds only with no error.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{"severity >= 8", `tier == "gold" && severity > 1.5`, `"b" in tags`, "order.id == 7", "severity /", "((", "size(tags) > 0"} {
		f.Add(s, `{"severity": 9, "tier": "gold", "tags": ["a"], "order": {"id": 7}}`)
	}
	f.Fuzz(func(t *testing.T, src, vars string) {
		p, err := Compile(src, []string{"severity", "tier", "tags", "order"})
		if err != nil {
			return
		}
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(vars), &m) != nil {
			return
		}
		if ok, err := p.Holds(m); ok && err != nil {
			t.Fatalf("%q holds with an error: %v", src, err)
		}
	})
}
