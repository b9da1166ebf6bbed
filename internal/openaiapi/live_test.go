package openaiapi

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/chat"
)

// TestLiveReplies: each reply is numbered when its first fragment comes,
// fragments are handed on as they come (two replies typed at once
// interleave), a reset closes a reply with what it had and the restarted
// reply is another, empty fragments open nothing, and close ends the
// replies still open in the order they began.
func TestLiveReplies(t *testing.T) {
	t.Parallel()
	var got []string
	l := newLiveReplies()
	l.begin = func(i int, name string) error { got = append(got, fmt.Sprintf("begin %d %s", i, name)); return nil }
	l.more = func(i int, name, s string) error {
		got = append(got, fmt.Sprintf("more %d %s %q", i, name, s))
		return nil
	}
	l.end = func(i int, text string) error { got = append(got, fmt.Sprintf("end %d %q", i, text)); return nil }
	for _, d := range []chat.Delta{
		{Name: "a", Content: "", AfterSeq: 3},
		{Name: "a", Content: "Hel", AfterSeq: 3},
		{Name: "b", Content: "Yo", AfterSeq: 3},
		{Name: "a", Content: "lo", AfterSeq: 3},
		{Name: "b", Reset: true, AfterSeq: 3},
		{Name: "c", Reset: true, AfterSeq: 3},
		{Name: "b", Content: "Yes", AfterSeq: 3},
		{Name: "a", Content: "Again", AfterSeq: 7},
	} {
		if err := l.delta(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.close(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`begin 0 a`, `more 0 a "Hel"`, `begin 1 b`, `more 1 b "Yo"`, `more 0 a "lo"`, `end 1 "Yo"`,
		`begin 2 b`, `more 2 b "Yes"`, `begin 3 a`, `more 3 a "Again"`,
		`end 0 "Hello"`, `end 2 "Yes"`, `end 3 "Again"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestLiveRepliesBounded: past maxLiveReplies, replies are not shown live.
func TestLiveRepliesBounded(t *testing.T) {
	t.Parallel()
	l := newLiveReplies()
	shown := 0
	l.more = func(int, string, string) error { shown++; return nil }
	for i := range maxLiveReplies + 5 {
		if err := l.delta(chat.Delta{Name: "a", Content: "x", AfterSeq: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if shown != maxLiveReplies || l.n != maxLiveReplies {
		t.Errorf("%d replies shown (%d numbered), want %d", shown, l.n, maxLiveReplies)
	}
}
