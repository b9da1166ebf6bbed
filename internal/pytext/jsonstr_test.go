package pytext

import (
	"strings"
	"testing"
)

// The expectations are what CPython 3.12 prints for
// "{x}".format(x=json.loads(raw)).
func TestWriteJSONStr(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		`"Ada"`:                          "Ada",
		`8`:                              "8",
		`-0`:                             "0",
		`123456789012345678901234567890`: "123456789012345678901234567890",
		`8.0`:                            "8.0",
		`1e16`:                           "1e+16",
		`0.00001`:                        "1e-05",
		`true`:                           "True",
		`null`:                           "None",
		`["a", 1, 2.5, false, null]`:     "['a', 1, 2.5, False, None]",
		`{"b": {"it's": "x"}, "a": []}`:  `{'b': {"it's": 'x'}, 'a': []}`,
	} {
		var b strings.Builder
		if err := WriteJSONStr(&b, []byte(raw)); err != nil || b.String() != want {
			t.Errorf("WriteJSONStr(%s) = %q, %v; want %q", raw, b.String(), err, want)
		}
	}
}

// FuzzParseFormat: no template makes ParseFormat panic, and what it
// accepts is literal text and names without braces.
func FuzzParseFormat(f *testing.F) {
	for _, s := range []string{"Customer {customer} ({tier})", "{{x}}", "{", "}", "{0}", "{a!r}", "{a.b}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		parts, err := ParseFormat(s)
		if err != nil {
			return
		}
		for _, p := range parts {
			if p.Field && (p.Text == "" || strings.ContainsAny(p.Text, "{}")) {
				t.Fatalf("%q: field %q", s, p.Text)
			}
		}
	})
}
