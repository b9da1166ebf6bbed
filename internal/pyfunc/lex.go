package pyfunc

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// tokKind is the kind of a token of a function's signature.
type tokKind int

const (
	tokEOF    tokKind = iota
	tokName           // an identifier or keyword
	tokNumber         // a numeric literal, as written
	tokString         // a string literal, as written (prefix and quotes included)
	tokOp             // an operator or delimiter
)

// token is one lexical token; pos is its byte offset in the source.
type token struct {
	kind tokKind
	text string
	pos  int
}

// lexer reads the tokens of Python source from a position on. It knows
// enough of Python's lexical grammar for a def statement's header:
// identifiers, numbers, every form of string literal, operators, comments
// and implicit line joining inside brackets.
type lexer struct {
	src string
	pos int
}

// ops are Python's operators and delimiters that a signature may hold,
// longest first so that "->" is not read as "-".
var ops = []string{"**", "->", "//", "==", "!=", "<=", ">=", ":=", "(", ")", "[", "]", "{", "}", ",", ":", "=", "*", "/", ".", "|", "-", "+", "~", "@", "%", "&", "^", "<", ">", ";"}

// next returns the next token, skipping whitespace, comments and line
// continuations. Newlines are skipped too: the parser only reads inside a
// def header, where it tracks brackets itself and stops at the header's
// closing colon.
func (l *lexer) next() (token, error) {
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\f' || c == '\r' || c == '\n':
			l.pos++
			continue
		case c == '\\' && l.pos+1 < len(l.src) && (l.src[l.pos+1] == '\n' || l.src[l.pos+1] == '\r'):
			l.pos += 2
			continue
		case c == '#':
			for l.pos < len(l.src) && l.src[l.pos] != '\n' {
				l.pos++
			}
			continue
		}
		break
	}
	start := l.pos
	if l.pos >= len(l.src) {
		return token{kind: tokEOF, pos: start}, nil
	}
	c := l.src[l.pos]
	switch {
	case isNameStart(l.src[l.pos:]):
		for l.pos < len(l.src) {
			r, size := utf8.DecodeRuneInString(l.src[l.pos:])
			if !(r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r) || unicode.Is(unicode.Pc, r)) {
				break
			}
			l.pos += size
		}
		name := l.src[start:l.pos]
		if l.pos < len(l.src) && (l.src[l.pos] == '\'' || l.src[l.pos] == '"') && isStringPrefix(name) {
			return l.str(start)
		}
		return token{kind: tokName, text: name, pos: start}, nil
	case c >= '0' && c <= '9' || c == '.' && l.pos+1 < len(l.src) && l.src[l.pos+1] >= '0' && l.src[l.pos+1] <= '9':
		for l.pos < len(l.src) {
			d := l.src[l.pos]
			if d >= '0' && d <= '9' || d >= 'a' && d <= 'z' || d >= 'A' && d <= 'Z' || d == '_' || d == '.' {
				l.pos++
				continue
			}
			// The sign of an exponent: 1e-5, 2E+3.
			if (d == '-' || d == '+') && (l.src[l.pos-1] == 'e' || l.src[l.pos-1] == 'E') && !strings.HasPrefix(strings.ToLower(l.src[start:]), "0x") {
				l.pos++
				continue
			}
			break
		}
		return token{kind: tokNumber, text: l.src[start:l.pos], pos: start}, nil
	case c == '\'' || c == '"':
		return l.str(start)
	}
	for _, op := range ops {
		if strings.HasPrefix(l.src[l.pos:], op) {
			l.pos += len(op)
			return token{kind: tokOp, text: op, pos: start}, nil
		}
	}
	r, _ := utf8.DecodeRuneInString(l.src[l.pos:])
	return token{}, fmt.Errorf("unexpected character %q", r)
}

// str reads a string literal whose prefix (if any) starts at start and
// whose quote is at l.pos.
func (l *lexer) str(start int) (token, error) {
	q := l.src[l.pos]
	quote := string(q)
	if strings.HasPrefix(l.src[l.pos:], strings.Repeat(quote, 3)) {
		quote = strings.Repeat(quote, 3)
	}
	l.pos += len(quote)
	for l.pos < len(l.src) {
		switch {
		case l.src[l.pos] == '\\':
			l.pos += 2
		case strings.HasPrefix(l.src[l.pos:], quote):
			l.pos += len(quote)
			return token{kind: tokString, text: l.src[start:l.pos], pos: start}, nil
		case l.src[l.pos] == '\n' && len(quote) == 1:
			return token{}, fmt.Errorf("unterminated string literal")
		default:
			l.pos++
		}
	}
	return token{}, fmt.Errorf("unterminated string literal")
}

// isNameStart reports whether s starts with a character an identifier may
// start with.
func isNameStart(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return r == '_' || unicode.IsLetter(r)
}

// isStringPrefix reports whether name is a string literal prefix (r, b, u,
// f and their combinations, in any case).
func isStringPrefix(name string) bool {
	switch strings.ToLower(name) {
	case "r", "u", "b", "f", "br", "rb", "fr", "rf":
		return true
	}
	return false
}
