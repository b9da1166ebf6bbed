package jsonobj

import (
	"encoding/json"
	"testing"
)

// TestWritesWhatJSONMarshalWrites: an object written field by field is
// json.Marshal's bytes for the same struct, and a string json.Marshal
// escapes is refused rather than written otherwise. Break: let quote pass
// a '<' and the "a<b" case fails.
func TestWritesWhatJSONMarshalWrites(t *testing.T) {
	t.Parallel()
	type usage struct {
		A int64 `json:"a"`
		B int64 `json:"b"`
	}
	type obj struct {
		S  string   `json:"s"`
		N  int64    `json:"n"`
		T  bool     `json:"t"`
		L  []string `json:"l"`
		U  usage    `json:"u"`
		Z  []string `json:"z"`
		S2 string   `json:"s2"`
	}
	for _, s := range []string{"plain", "", "tab\there", "quote\"", "back\\slash", "a<b", "a>b", "a&b", "é", "\u2028"} {
		v := obj{S: "x", N: -42, T: true, L: []string{"a", "b"}, U: usage{1, 2}, S2: s}
		var w Writer
		w.Open()
		w.Str("s", v.S)
		w.Int("n", v.N)
		w.Bool("t", v.T)
		w.Strs("l", v.L)
		w.Begin("u")
		w.Int("a", v.U.A)
		w.Int("b", v.U.B)
		w.End()
		w.Strs("z", v.Z)
		w.Str("s2", v.S2)
		got, ok := w.Close()
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		// A string json.Marshal escapes is refused; so is any non-ASCII,
		// to be safe; plain ASCII is written.
		escapes := string(want) != `{"s":"x","n":-42,"t":true,"l":["a","b"],"u":{"a":1,"b":2},"z":null,"s2":"`+s+`"}`
		if escapes && ok || (s == "plain" || s == "") && !ok {
			t.Errorf("%q: ok %v (json.Marshal escapes it: %v)", s, ok, escapes)
		}
		if ok && string(got) != string(want) {
			t.Errorf("%q: wrote\n%s\njson.Marshal writes\n%s", s, got, want)
		}
	}
}
