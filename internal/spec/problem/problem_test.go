package problem_test

import (
	"testing"

	"github.com/agentd/agentd/internal/spec/problem"
)

func TestEscape(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ token, escaped string }{
		{"", ""},
		{"plain", "plain"},
		{"a/b", "a~1b"},
		{"a~b", "a~0b"},
		{"~1", "~01"}, // the "~" is escaped first, or this would read back as "/"
		{"/~/", "~1~0~1"},
	} {
		if got := problem.Escape(c.token); got != c.escaped {
			t.Errorf("Escape(%q) = %q, want %q", c.token, got, c.escaped)
		}
		if got := problem.Unescape(c.escaped); got != c.token {
			t.Errorf("Unescape(%q) = %q, want %q", c.escaped, got, c.token)
		}
	}
	if got := problem.Key(problem.Index("/agents", 2), "x/y"); got != "/agents/2/x~1y" {
		t.Errorf("Key(Index) = %q", got)
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	var l problem.List
	if l.Items() != nil || l.Len() != 0 {
		t.Fatalf("empty list = %v", l.Items())
	}
	l.Add("/b", "must be at most %d bytes", 3)
	l.Add("/a", "%s", "100% literal")
	l.AddAll("/tools/0", []problem.Problem{{Path: "/name", Message: "bad"}, {Path: "", Message: "whole"}})
	want := []problem.Problem{{"/b", "must be at most 3 bytes"}, {"/a", "100% literal"}, {"/tools/0/name", "bad"}, {"/tools/0", "whole"}}
	if got := l.Items(); len(got) != len(want) {
		t.Fatalf("Items = %v", got)
	} else {
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("Items[%d] = %v, want %v", i, got[i], want[i])
			}
		}
	}
	sorted := l.Sorted()
	for i := 1; i < len(sorted); i++ {
		if sorted[i-1].Path > sorted[i].Path {
			t.Errorf("Sorted = %v", sorted)
		}
	}
}

func TestPosition(t *testing.T) {
	t.Parallel()
	body := []byte("{\n  \"a\": 1,\n  \"é\": x\n}")
	for _, c := range []struct {
		offset int64
		want   string
	}{
		{0, "line 1, column 1"},
		{2, "line 2, column 1"},
		{int64(len("{\n  \"a\": 1,\n  \"é\": ")), "line 3, column 8"}, // é is one column, two bytes
		{-5, "line 1, column 1"},
		{1 << 20, "line 4, column 2"},
	} {
		if got := problem.Position(body, c.offset); got != c.want {
			t.Errorf("Position(%d) = %q, want %q", c.offset, got, c.want)
		}
	}
}
