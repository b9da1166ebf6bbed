package llm

import "strings"

// maxNameLen is the API's limit on message and function names.
const maxNameLen = 64

// sanitizeName makes s acceptable as an OpenAI message or function name,
// ^[a-zA-Z0-9_-]{1,64}$: every other character (a space, a dot, a non-ASCII
// letter) becomes '_' and the result is cut to 64 characters. An empty name
// stays empty, which leaves the field out. Different names can map to the same
// result; a name only tells the model who spoke, so that is harmless.
func sanitizeName(s string) string {
	if validName(s) {
		return s // most names are: every call sends the history's names
	}
	var b strings.Builder
	for _, r := range s {
		if b.Len() == maxNameLen {
			break
		}
		if r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// validName reports whether s is a name the API takes as it is (or empty).
func validName(s string) bool {
	if len(s) > maxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '_' && c != '-' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}
