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

// Every ASCII byte alone and between plain text, as encoding/json writes it.
func TestAppendEveryASCIIByte(t *testing.T) {
	for c := range 128 {
		for _, s := range []string{string(rune(c)), "ab" + string(rune(c)) + "cd"} {
			want, _ := json.Marshal(s)
			if got := Append(nil, s); !bytes.Equal(got, want) {
				t.Errorf("Append(%q) = %q, want %q", s, got, want)
			}
		}
	}
}

func BenchmarkAppend(b *testing.B) {
	s := strings.Repeat("a sentence of a reply ", 10)
	var buf []byte
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = Append(buf[:0], s)
	}
}

// Every byte, at every place of the words the fast path reads eight bytes
// at a time, in plain text around it.
func TestAppendEveryByteInAWord(t *testing.T) {
	plain := []byte("plain text, in words of eight")
	for c := range 256 {
		for at := range 16 {
			b := bytes.Clone(plain)
			b[at] = byte(c)
			s := string(b)
			want, _ := json.Marshal(s)
			if got := Append(nil, s); !bytes.Equal(got, want) {
				t.Fatalf("Append(%q) = %q, want %q", s, got, want)
			}
		}
	}
}

// BenchmarkAppendLong is a long plain reply, where most of a history's
// bytes are.
func BenchmarkAppendLong(b *testing.B) {
	s := strings.Repeat("A longer paragraph of a model's reply, in plain text, with commas; and digits 0123456789. ", 40)
	var buf []byte
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = Append(buf[:0], s)
	}
}
