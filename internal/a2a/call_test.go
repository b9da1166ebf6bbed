package a2a

import (
	"encoding/json"
	"testing"
)

func TestMessageContent(t *testing.T) {
	text := func(s string) Part { return Part{Text: &s} }
	url := "https://example.com/x.png"
	tests := []struct {
		name  string
		parts []Part
		text  string
		data  string
		code  int
	}{
		{"texts are joined", []Part{text("a"), text("b")}, "a\nb", "", 0},
		{"one data part", []Part{{Data: json.RawMessage(`{"speaker":"x"}`)}}, "", `{"speaker":"x"}`, 0},
		{"two data parts", []Part{{Data: json.RawMessage(`{}`)}, {Data: json.RawMessage(`{}`)}}, "", "", codeInvalidParams},
		{"a file", []Part{{URL: &url}}, "", "", codeContentTypeNotSupported},
		{"an empty part", []Part{{}}, "", "", codeInvalidParams},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, data, e := messageContent(tt.parts)
			code := 0
			if e != nil {
				code = e.Code
			}
			if got != tt.text || string(data) != tt.data || code != tt.code {
				t.Errorf("= %q, %s, %d; want %q, %s, %d", got, data, code, tt.text, tt.data, tt.code)
			}
		})
	}
}
