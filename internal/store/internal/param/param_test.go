package param

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/agentd/agentd/internal/chat"
)

func TestCursorRoundTrip(t *testing.T) {
	c := &chat.Chat{ID: "6d9c7b36-5a2b-4f34-9f4e-0d0c8b7f2a11", CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("x", 3600))}
	got, err := DecodeCursor(EncodeCursor(c))
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != c.ID || !got.CreatedAt.Equal(c.CreatedAt) || got.CreatedAt.Location() != time.UTC {
		t.Fatalf("DecodeCursor(EncodeCursor(c)) = %+v, want %s at %v in UTC", got, c.ID, c.CreatedAt)
	}
}

func TestDecodeCursorRejects(t *testing.T) {
	for _, s := range []string{"", "!!", "bm9wZQ", "MTJfbm9wZQ", "eF82ZDljN2IzNi01YTJiLTRmMzQtOWY0ZS0wZDBjOGI3ZjJhMTE"} {
		if _, err := DecodeCursor(s); !errors.Is(err, chat.ErrInvalidCursor) {
			t.Errorf("DecodeCursor(%q): err = %v, want ErrInvalidCursor", s, err)
		}
	}
}

func FuzzDecodeCursor(f *testing.F) {
	f.Add(EncodeCursor(&chat.Chat{ID: "6d9c7b36-5a2b-4f34-9f4e-0d0c8b7f2a11", CreatedAt: time.Unix(0, 1)}))
	f.Add("bm9wZQ")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		cur, err := DecodeCursor(s)
		if err != nil {
			if !errors.Is(err, chat.ErrInvalidCursor) {
				t.Fatalf("DecodeCursor(%q): err = %v, not ErrInvalidCursor", s, err)
			}
			return
		}
		// Whatever decodes must re-encode to a cursor for the same position.
		again, err := DecodeCursor(EncodeCursor(&chat.Chat{ID: cur.ID, CreatedAt: cur.CreatedAt}))
		if err != nil || again != cur {
			t.Fatalf("cursor %q decodes to %+v, which round-trips to %+v, %v", s, cur, again, err)
		}
	})
}

func TestLimit(t *testing.T) {
	for _, tc := range []struct{ n, want int }{{-1, 50}, {0, 50}, {1, 1}, {1000, 1000}, {1001, 1000}} {
		if got := Limit(tc.n, 50, 1000); got != tc.want {
			t.Errorf("Limit(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

func TestText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"}, {"", ""}, {"a\x00b", "a\uFFFDb"}, {"\xff\xfe x", "\uFFFD x"}, {"ok ✓", "ok ✓"},
	} {
		if got := Text(tc.in); got != tc.want {
			t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	calls := []chat.ToolCall{{ID: "c", Function: chat.FunctionCall{Arguments: "{}"}}}
	if got := ToolCalls(calls); &got[0] != &calls[0] {
		t.Error("ToolCalls copied clean calls")
	}
}

func FuzzText(f *testing.F) {
	f.Add("a\x00b\xff")
	f.Fuzz(func(t *testing.T, s string) {
		got := Text(s)
		if !utf8.ValidString(got) || strings.IndexByte(got, 0) >= 0 {
			t.Fatalf("Text(%q) = %q: not valid UTF-8 without NUL", s, got)
		}
		if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 && got != s {
			t.Fatalf("Text changed clean text %q to %q", s, got)
		}
	})
}

func TestCheckAppend(t *testing.T) {
	ok := func() *chat.AppendParams {
		return &chat.AppendParams{ChatID: "6D9C7B36-5A2B-4F34-9F4E-0D0C8B7F2A11", Update: chat.ChatUpdate{Status: chat.StatusRunning},
			Events: []chat.Event{{Seq: 3, Type: chat.EventMessage}, {Seq: 4, Type: chat.EventMessage, ChatID: "6d9c7b36-5a2b-4f34-9f4e-0d0c8b7f2a11"}}}
	}
	id, err := CheckAppend(ok())
	if err != nil || id != "6d9c7b36-5a2b-4f34-9f4e-0d0c8b7f2a11" {
		t.Fatalf("CheckAppend(valid) = %q, %v", id, err)
	}
	for name, mutate := range map[string]func(p *chat.AppendParams){
		"no events":     func(p *chat.AppendParams) { p.Events = nil },
		"seq 0":         func(p *chat.AppendParams) { p.Events[0].Seq, p.Events[1].Seq = 0, 1 },
		"gap":           func(p *chat.AppendParams) { p.Events[1].Seq = 5 },
		"no type":       func(p *chat.AppendParams) { p.Events[1].Type = "" },
		"other chat":    func(p *chat.AppendParams) { p.Events[1].ChatID = "00000000-0000-0000-0000-000000000000" },
		"bad status":    func(p *chat.AppendParams) { p.Update.Status = "" },
		"bad chat id":   func(p *chat.AppendParams) { p.ChatID = "x" },
		"bad event id":  func(p *chat.AppendParams) { p.Events[0].ChatID = "x" },
		"reversed seqs": func(p *chat.AppendParams) { p.Events[0].Seq, p.Events[1].Seq = 4, 3 },
	} {
		p := ok()
		mutate(p)
		if _, err := CheckAppend(p); !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckAppend(%s): err = %v, want ErrInvalid", name, err)
		}
	}
}

// TestChatIDIsUUIDsCanonicalForm: the quick path for ids already in
// canonical form must answer what parsing does, for every form of a UUID
// and for near misses.
func TestChatIDIsUUIDsCanonicalForm(t *testing.T) {
	var ids []string
	for range 200 {
		u := uuid.New()
		s := u.String()
		ids = append(ids, s, strings.ToUpper(s), "{"+s+"}", "urn:uuid:"+s, strings.ReplaceAll(s, "-", ""),
			s[:35], s+"0", s[:8]+"_"+s[9:], s[:3]+"g"+s[4:], s[:8]+s[9:]+"-")
	}
	for _, id := range ids {
		got, ok := ChatID(id)
		u, err := uuid.Parse(id)
		want, wantOK := "", err == nil
		if wantOK {
			want = u.String()
		}
		if got != want || ok != wantOK {
			t.Errorf("ChatID(%q) = %q, %v; want %q, %v", id, got, ok, want, wantOK)
		}
	}
}

func TestEventTypeFilter(t *testing.T) {
	for typ, want := range map[chat.EventType]string{"": "", chat.EventContextUpdated: " AND type = 'context.updated'"} {
		if got, err := EventTypeFilter(typ); err != nil || got != want {
			t.Errorf("EventTypeFilter(%q) = %q, %v; want %q", typ, got, err, want)
		}
	}
	for _, bad := range []chat.EventType{"x' OR '1'='1", "Message", "a b"} {
		if _, err := EventTypeFilter(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("EventTypeFilter(%q): %v, want ErrInvalid", bad, err)
		}
	}
}
