package pytext

import (
	"errors"
	"fmt"
	"strings"
)

// FormatPart is a piece of a format string: literal text, or (Field)
// the name of a replacement field.
type FormatPart struct {
	Text  string
	Field bool
}

// ParseFormat splits a Python format string into literal text and
// replacement fields; fields with a conversion, a format spec, an index or
// an attribute, and automatic or positional fields, are refused.
func ParseFormat(s string) ([]FormatPart, error) {
	var parts []FormatPart
	var lit strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '{':
			if i+1 < len(s) && s[i+1] == '{' {
				lit.WriteByte('{')
				i++
				continue
			}
			end := strings.IndexByte(s[i+1:], '}')
			if end < 0 {
				return nil, errors.New("single '{' encountered in format string")
			}
			name := s[i+1 : i+1+end]
			switch {
			case name == "":
				return nil, errors.New("{} (a positional field) has no value: name a field, as in {title}")
			case strings.ContainsAny(name, "{!:.["):
				return nil, fmt.Errorf("{%s}: conversions, format specs, indexes and attributes are not supported: only {field}", name)
			case name[0] >= '0' && name[0] <= '9':
				return nil, fmt.Errorf("{%s}: a positional field has no value: name a field", name)
			}
			if lit.Len() > 0 {
				parts = append(parts, FormatPart{Text: lit.String()})
				lit.Reset()
			}
			parts = append(parts, FormatPart{Text: name, Field: true})
			i += end + 1
		case '}':
			if i+1 < len(s) && s[i+1] == '}' {
				lit.WriteByte('}')
				i++
				continue
			}
			return nil, errors.New("single '}' encountered in format string")
		default:
			lit.WriteByte(c)
		}
	}
	if lit.Len() > 0 {
		parts = append(parts, FormatPart{Text: lit.String()})
	}
	return parts, nil
}
