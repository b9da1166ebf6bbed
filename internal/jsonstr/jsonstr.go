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
