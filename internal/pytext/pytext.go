// Package pytext writes values as Python writes them: a str's repr, a
// float's repr and json.dumps's strings. agentd shows models text that
// AgentChat made with these functions (tool results, structured replies,
// token counts over the JSON of a request), and that text must be equal to
// the byte, so the rules live in one place.
package pytext

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Float is Python's repr of a finite float (and so json.dumps's): the
// shortest digits that read back as f, positional with at least one
// decimal when the decimal exponent is in [-4, 16), else scientific with a
// signed exponent of at least two digits: 1.0, 0.0001, 1e-05, 1e+16, -0.0.
func Float(f float64) string {
	e := strconv.FormatFloat(f, 'e', -1, 64) // -d.ddde±XX
	sign := ""
	if e[0] == '-' {
		sign, e = "-", e[1:]
	}
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	digits := strings.Replace(mant, ".", "", 1)
	if digits == "0" {
		exp = 0
	}
	point := exp + 1 // the value is 0.digits × 10^point
	if point <= -4 || point > 16 {
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		es := "+"
		if exp < 0 {
			es, exp = "-", -exp
		}
		return fmt.Sprintf("%s%se%s%02d", sign, m, es, exp)
	}
	switch {
	case point <= 0:
		return sign + "0." + strings.Repeat("0", -point) + digits
	case point >= len(digits):
		return sign + digits + strings.Repeat("0", point-len(digits)) + ".0"
	}
	return sign + digits[:point] + "." + digits[point:]
}

// WriteStrRepr writes Python's repr of a str: single quotes unless the text
// has a single quote and no double quote; backslash escapes for the quote,
// the backslash, \t \n \r, other control characters and characters that
// are not printable (\xXX, \uXXXX, \UXXXXXXXX by size).
func WriteStrRepr(b *strings.Builder, s string) {
	q := byte('\'')
	if strings.ContainsRune(s, '\'') && !strings.ContainsRune(s, '"') {
		q = '"'
	}
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < ' ' || r == 0x7f:
			fmt.Fprintf(b, `\x%02x`, r)
		case r < 0x7f || unicode.IsPrint(r):
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(b, `\u%04x`, r)
		default:
			fmt.Fprintf(b, `\U%08x`, r)
		}
	}
	b.WriteByte(q)
}

// WriteJSONString writes s as a JSON string the way Python's json.dumps
// does (and pydantic's serializer, which escapes alike): the quote, the
// backslash, \n \r \t \b \f by name and other control characters as
// \u00XX. With ensureASCII (json.dumps's default) every character outside
// printable ASCII is a \uXXXX escape too, a surrogate pair above U+FFFF;
// without it such characters are written as they are.
func WriteJSONString(b *strings.Builder, s string, ensureASCII bool) {
	const hex = "0123456789abcdef"
	u := func(r rune) {
		b.WriteString(`\u`)
		for shift := 12; shift >= 0; shift -= 4 {
			b.WriteByte(hex[(r>>shift)&0xf])
		}
	}
	b.WriteByte('"')
	for _, r := range strings.ToValidUTF8(s, string(utf8.RuneError)) {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20:
				u(r)
			case !ensureASCII || r <= 0x7e:
				b.WriteRune(r)
			case r > 0xffff:
				r -= 0x10000
				u(0xd800 + (r>>10)&0x3ff)
				u(0xdc00 + r&0x3ff)
			default:
				u(r)
			}
		}
	}
	b.WriteByte('"')
}
