package pytext

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// WriteJSONStr writes str() of the Python value json.loads makes of a JSON
// value: a string as it is, an integer's digits, a float's repr, True,
// False, None, and lists and dicts as their reprs (a dict's keys in the
// order the text gives them). It is how a value of a chat's context
// variables reads in a template, as Swarm's instructions.format(**ctx)
// writes it.
func WriteJSONStr(b *strings.Builder, raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if s, ok := tok.(string); ok {
		b.WriteString(s)
		return nil
	}
	return writeRepr(b, dec, tok)
}

// writeRepr writes repr() of the value that starts with tok.
func writeRepr(b *strings.Builder, dec *json.Decoder, tok json.Token) error {
	switch t := tok.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		if t {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case string:
		WriteStrRepr(b, t)
	case json.Number:
		b.WriteString(pyNumber(string(t)))
	case json.Delim:
		closing := json.Delim(']')
		if t == '{' {
			closing = '}'
		}
		b.WriteByte(byte(t))
		for i := 0; ; i++ {
			next, err := dec.Token()
			if err != nil {
				return err
			}
			if next == closing {
				break
			}
			if i > 0 {
				b.WriteString(", ")
			}
			if t == '{' {
				WriteStrRepr(b, next.(string))
				b.WriteString(": ")
				if next, err = dec.Token(); err != nil {
					return err
				}
			}
			if err := writeRepr(b, dec, next); err != nil {
				return err
			}
		}
		b.WriteByte(byte(closing))
	default:
		return fmt.Errorf("unexpected JSON token %v", tok)
	}
	return nil
}

// pyNumber is str() of the number json.loads reads from a JSON number: an
// int for a literal without fraction or exponent (of any size), else a
// float.
func pyNumber(lit string) string {
	if !strings.ContainsAny(lit, ".eE") {
		if n, ok := new(big.Int).SetString(lit, 10); ok {
			return n.String()
		}
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		if f > 0 {
			return "inf"
		}
		if f < 0 {
			return "-inf"
		}
	}
	return Float(f)
}
