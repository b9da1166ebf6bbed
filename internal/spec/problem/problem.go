// Package problem reports what is wrong with a client's JSON, each problem
// at the JSON pointer (RFC 6901) of the value it is about. Every decoder
// and checker of a request (the spec check, tool definitions, output
// schemas, Python signatures, run, fork and metadata bodies, team files)
// collects its problems with a List, so that pointers are escaped one way
// and a client is told every problem at once.
//
// It is a package of its own, below internal/spec, because packages that
// spec itself imports (internal/structured) report problems too.
package problem

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Problem is one thing wrong with a request: Path is the JSON pointer of
// the value ("" for the whole body), Message what is wrong with it.
type Problem struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Escape escapes one reference token of a JSON pointer: "~" becomes "~0"
// and "/" becomes "~1" (RFC 6901 §3).
func Escape(token string) string {
	if !strings.ContainsAny(token, "~/") {
		return token // nearly every key: no allocation
	}
	return tokenEscaper.Replace(token)
}

// Unescape reverses Escape.
func Unescape(token string) string {
	if !strings.Contains(token, "~") {
		return token
	}
	return tokenUnescaper.Replace(token)
}

var (
	tokenEscaper = strings.NewReplacer("~", "~0", "/", "~1")
	// A Replacer tries its pairs in order at each position, so "~01"
	// becomes "~1" and not "/", as RFC 6901 asks.
	tokenUnescaper = strings.NewReplacer("~1", "/", "~0", "~")
)

// Key is the pointer of an object member: base followed by the escaped key.
func Key(base, key string) string { return base + "/" + Escape(key) }

// Index is the pointer of an array element.
func Index(base string, i int) string { return base + "/" + strconv.Itoa(i) }

// Under reports whether one of ps is at path or inside the value there.
func Under(ps []Problem, path string) bool {
	for _, p := range ps {
		if p.Path == path || strings.HasPrefix(p.Path, path+"/") {
			return true
		}
	}
	return false
}

// List collects problems. The zero value is an empty list ready to use.
type List struct {
	items []Problem
}

// Add records a problem at path; the message is formatted as fmt.Sprintf
// does.
func (l *List) Add(path, format string, args ...any) {
	l.items = append(l.items, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// AddAll records problems found by a checker of a part of the request,
// whose paths are relative to that part: each is put under base.
func (l *List) AddAll(base string, ps []Problem) {
	for _, p := range ps {
		l.items = append(l.items, Problem{Path: base + p.Path, Message: p.Message})
	}
}

// Len is the number of problems recorded.
func (l *List) Len() int { return len(l.items) }

// Items are the problems in the order they were recorded; nil when there
// are none.
func (l *List) Items() []Problem { return l.items }

// Sorted are the problems ordered by path (stable for one path): problems
// found while ranging over a map would otherwise come in a different order
// every time.
func (l *List) Sorted() []Problem {
	slices.SortStableFunc(l.items, func(a, b Problem) int { return cmp.Compare(a.Path, b.Path) })
	return l.items
}

// DescribeJSONError says what is wrong with a body encoding/json could not
// decode and where, by line and column: "invalid character 'x' looking for
// beginning of value at line 3, column 7".
func DescribeJSONError(body []byte, err error) string {
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &syntax):
		// Offset counts the bytes read, the offending one included.
		return strings.TrimPrefix(syntax.Error(), "json: ") + " at " + Position(body, syntax.Offset-1)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected end of input at " + Position(body, int64(len(body)))
	default:
		return strings.TrimPrefix(err.Error(), "json: ")
	}
}

// Position says where byte offset of body is, as a person reads it:
// "line 3, column 7" (both counted from 1, columns in characters). An
// encoding/json error gives an offset, which means little in a body of
// several kilobytes.
func Position(body []byte, offset int64) string {
	offset = min(max(offset, 0), int64(len(body)))
	before := body[:offset]
	line := 1 + strings.Count(string(before), "\n")
	if i := strings.LastIndexByte(string(before), '\n'); i >= 0 {
		before = before[i+1:]
	}
	col := 1 + len([]rune(string(before)))
	return fmt.Sprintf("line %d, column %d", line, col)
}
