package jsonstr

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzAppend: any string, the bytes encoding/json writes for it.
func FuzzAppend(f *testing.F) {
	for _, s := range []string{
		"", "plain text of a reply", "héllo \u2028 \u2029 <b>&</b>",
		"a\x00b\x1f\"\\\b\f\n\r\t\x7f", "\xff\xfe bad \xe2\x80 utf-8 \xed\xa0\x80 \xf4\x90\x80\x80",
		strings.Repeat("eight by", 5) + "<", "😀 \U0010ffff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		got := Append([]byte("x"), s)
		if !bytes.Equal(got[1:], want) || got[0] != 'x' {
			t.Errorf("Append(%q)\n got %q\nwant x%q", s, got, want)
		}
	})
}

// Every byte alone, between plain text, and at every place of the words
// that the fast path reads eight bytes at a time, as encoding/json writes
// it.
func TestAppendEveryByte(t *testing.T) {
	plain := "plain text, in words of eight"
	for c := range 256 {
		ss := []string{string([]byte{byte(c)}), "ab" + string([]byte{byte(c)}) + "cd"}
		for at := range 16 {
			ss = append(ss, plain[:at]+string([]byte{byte(c)})+plain[at+1:])
		}
		for _, s := range ss {
			want, _ := json.Marshal(s)
			if got := Append(nil, s); !bytes.Equal(got, want) {
				t.Fatalf("Append(%q) = %q, want %q", s, got, want)
			}
		}
	}
}

// BenchmarkAppend: a short sentence, and a long plain reply, where most of
// a history's bytes are.
func BenchmarkAppend(b *testing.B) {
	for name, s := range map[string]string{
		"short": strings.Repeat("a sentence of a reply ", 10),
		"long":  strings.Repeat("A longer paragraph of a model's reply, in plain text, with commas; and digits 0123456789. ", 40),
	} {
		b.Run(name, func(b *testing.B) {
			var buf []byte
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				buf = Append(buf[:0], s)
			}
		})
	}
}
