// Package jsonstr writes JSON strings as encoding/json writes them, for the
// hot paths that build JSON by hand: the body of a streamed model call
// (a chat's whole history, on every turn) and the message.delta events of
// a stream (one per token). Their readers cannot tell the hand-built JSON
// from encoding/json's, byte for byte.
package jsonstr

import (
	"strings"
	"unicode/utf8"
)

// Append appends s as a JSON string the way encoding/json writes one, its
// HTML escaping on (as json.Marshal has it): '"' and '\' escaped, the
// control characters as \b \f \n \r \t or \u00XX, '<', '>' and '&' as
// \u003c \u003e \u0026, U+2028 and U+2029 escaped, and each byte of
// invalid UTF-8 as \ufffd. FuzzAppend holds it to encoding/json.
func Append(b []byte, s string) []byte {
	b = append(b, '"')
	from := 0 // s[from:i] is yet to be appended as it is
	for i := 0; i < len(s); {
		// Eight bytes at a time while none of them needs a look: plain
		// ASCII text, nearly all of a chat's history, goes as it is. A
		// byte needs one if it is 0x80 or more, a control character, or
		// one of " \ < > &: the word-at-a-time tests for a byte below n,
		// (x-n·ones)&^x, and for a zero byte of x^(c·ones) set its high
		// bit, and are exact for "any byte of the word". Written out here:
		// as a function it was not inlined, and the call cost a third.
		for i+8 <= len(s) {
			w := s[i : i+8]
			x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
				uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
			y1, y2, y3, y4, y5 := x^(ones*'"'), x^(ones*'\\'), x^(ones*'<'), x^(ones*'>'), x^(ones*'&')
			bad := x | (x-ones*0x20)&^x | (y1-ones)&^y1 | (y2-ones)&^y2 | (y3-ones)&^y3 | (y4-ones)&^y4 | (y5-ones)&^y5
			if bad&high != 0 {
				break
			}
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if asIs[c] {
				i++
				continue
			}
			b = append(b, s[from:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			from = i
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b = append(append(b, s[from:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(append(b, s[from:i]...), '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += n
			continue
		}
		i += n
		from = i
	}
	return append(append(b, s[from:]...), '"')
}

// ones and high are a byte of 1 and a byte of 0x80 in each byte of a word.
const (
	ones = 0x0101010101010101
	high = 0x8080808080808080
)

const hexDigits = "0123456789abcdef"

// asIs holds the ASCII bytes a JSON string holds as they are. Nearly every
// byte of a history's text is one, and a lookup finds them faster than a
// chain of comparisons (BenchmarkAppend: about 1.6 times the bytes a
// second on plain text).
var asIs = func() (t [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = !strings.ContainsRune(`"\<>&`, c)
	}
	return t
}()
