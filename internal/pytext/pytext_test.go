package pytext

import (
	"math"
	"strings"
	"testing"
)

// The expected texts are what CPython 3.11 prints for the same values.

func TestFloat(t *testing.T) {
	for _, c := range []struct {
		f    float64
		want string
	}{
		{1, "1.0"}, {0.0001, "0.0001"}, {1e-05, "1e-05"}, {1e16, "1e+16"},
		{123456789012345678, "1.2345678901234568e+17"}, {math.Copysign(0, -1), "-0.0"}, {0, "0.0"},
		{0.1, "0.1"}, {1e22, "1e+22"}, {12345.678, "12345.678"}, {1.5e-7, "1.5e-07"},
		{9999999999999998, "9999999999999998.0"}, {5e-324, "5e-324"}, {-2.5, "-2.5"},
	} {
		if got := Float(c.f); got != c.want {
			t.Errorf("Float(%v) = %q, want %q", c.f, got, c.want)
		}
	}
}

func TestWriteStrRepr(t *testing.T) {
	for _, c := range []struct{ s, want string }{
		{"it's", `"it's"`},
		{`a'b"c`, `'a\'b"c'`},
		{"\x00\t\u00e9\u0085\u200b\U0001F600\x7f", `'\x00\té\x85\u200b` + "\U0001F600" + `\x7f'`},
		{"", "''"},
	} {
		var b strings.Builder
		WriteStrRepr(&b, c.s)
		if b.String() != c.want {
			t.Errorf("repr(%q) = %s, want %s", c.s, b.String(), c.want)
		}
	}
}

func TestWriteJSONString(t *testing.T) {
	s := "\u00e9\"\x7f\U0001F600\x01\n\u2028"
	for _, c := range []struct {
		ascii bool
		want  string
	}{
		{true, `"\u00e9\"\u007f\ud83d\ude00\u0001\n\u2028"`},
		{false, "\"\u00e9\\\"\x7f\U0001F600\\u0001\\n\u2028\""},
	} {
		var b strings.Builder
		WriteJSONString(&b, s, c.ascii)
		if b.String() != c.want {
			t.Errorf("json.dumps(ensure_ascii=%v) = %s, want %s", c.ascii, b.String(), c.want)
		}
	}
}
