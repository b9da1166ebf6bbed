package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"
)

// sseEvent is one parsed block of an event stream.
type sseEvent struct {
	id, event, data string
	comment         string
}

// sseReader parses an event stream the way an EventSource does (for the
// line endings this server writes).
type sseReader struct {
	r *bufio.Reader
	// retry is the last retry field seen; a block that holds only it is
	// not returned as an event.
	retry string
}

// next returns the next event or comment block; io.EOF when the stream ended.
func (s *sseReader) next() (sseEvent, error) {
	var (
		ev   sseEvent
		data []string
		seen bool
	)
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			if err == io.EOF && (seen || line != "") {
				return ev, io.ErrUnexpectedEOF
			}
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if !seen {
				continue
			}
			ev.data = strings.Join(data, "\n")
			return ev, nil
		}
		seen = true
		if strings.HasPrefix(line, ":") {
			ev.comment = strings.TrimSpace(line[1:])
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			ev.id = value
		case "event":
			ev.event = value
		case "data":
			data = append(data, value)
		case "retry":
			s.retry = value
			seen = ev.id != "" || ev.event != "" || len(data) > 0 || ev.comment != ""
		default:
			return ev, fmt.Errorf("unexpected field %q", field)
		}
	}
}

// openStream starts GET /v1/chats/{id}/events against a real HTTP server.
func openStream(t *testing.T, ctx context.Context, url string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// startServer serves chats over real HTTP, so that streaming, flushing and
// client disconnects behave as in production.
func startServer(t *testing.T, cfg Config, chats Chats) (*testServer, *httptest.Server) {
	t.Helper()
	ts := newTestServer(t, cfg, chats)
	srv := httptest.NewServer(ts.Handler())
	t.Cleanup(srv.Close)
	return ts, srv
}

// readUntilEOF reads events until the server closes the stream, skipping heartbeats.
func readUntilEOF(t *testing.T, r *sseReader) []sseEvent {
	t.Helper()
	var out []sseEvent
	for {
		ev, err := r.next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("read stream: %v", err)
		}
		if ev.comment == "" {
			out = append(out, ev)
		}
	}
}

// seqs returns the ids of events, failing on a non-numeric one.
func seqs(t *testing.T, events []sseEvent) []int64 {
	t.Helper()
	var out []int64
	for _, e := range events {
		n, err := strconv.ParseInt(e.id, 10, 64)
		if err != nil {
			t.Fatalf("event id %q: %v", e.id, err)
		}
		out = append(out, n)
	}
	return out
}

func seqRange(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// finishedLog is a completed chat with a typical log.
func finishedLog() *memLog {
	l := newMemLog(chat.StatusQueued)
	l.add(
		chat.Event{Type: chat.EventChatCreated},
		chat.Event{Type: chat.EventChatRunning},
		chat.Event{Type: chat.EventSpeakerSelected, Data: json.RawMessage(`{"agent":"coder","method":"round_robin","candidates":["coder"]}`)},
		msgEvent("coder", "hello\nworld"),
		terminalEvent(),
	)
	return l
}

func TestSSEFraming(t *testing.T) {
	t.Parallel()
	_, srv := startServer(t, Config{}, finishedLog())
	resp := openStream(t, t.Context(), srv.URL+"/v1/chats/"+testChatID+"/events")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d", resp.StatusCode)
	}
	for h, want := range map[string]string{
		"Content-Type":      "text/event-stream",
		"Cache-Control":     "no-cache",
		"X-Accel-Buffering": "no",
	} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	// A finished chat replays its whole log and the server closes the stream.
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	want := "retry: 2000\n\n" +
		"id: 1\nevent: chat.created\ndata: {}\n\n" +
		"id: 2\nevent: chat.running\ndata: {}\n\n" +
		"id: 3\nevent: speaker.selected\ndata: {\"agent\":\"coder\",\"method\":\"round_robin\",\"candidates\":[\"coder\"]}\n\n" +
		"id: 4\nevent: message\ndata: {\"seq\":4,\"type\":\"TextMessage\",\"role\":\"assistant\",\"name\":\"coder\",\"content\":\"hello\\nworld\",\"created_at\":\"2025-01-02T03:04:05Z\"}\n\n" +
		"id: 5\nevent: chat.completed\ndata: {\"status\":\"completed\",\"stop_reason\":\"max_round\",\"stop_detail\":\"Maximum number of turns 2 reached.\"}\n\n"
	if string(body) != want {
		t.Errorf("stream\n got %q\nwant %q", body, want)
	}
}

// A client that resumes gets every later event exactly once, in order, live
// events included, and the stream ends after the terminal event.
func TestSSEResumeLive(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		query  string
		header []string
	}{
		{"Last-Event-ID", "", []string{"Last-Event-ID", "1"}},
		{"header wins over after", "?after=0", []string{"Last-Event-ID", "1"}},
		{"after", "?after=1", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			log := newMemLog(chat.StatusQueued)
			log.add(chat.Event{Type: chat.EventChatCreated}, chat.Event{Type: chat.EventChatRunning},
				chat.Event{Type: chat.EventSpeakerSelected, Data: json.RawMessage(`{"agent":"a","method":"round_robin"}`)})
			_, srv := startServer(t, Config{}, log)
			resp := openStream(t, t.Context(), srv.URL+"/v1/chats/"+testChatID+"/events"+tt.query, tt.header...)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status = %d", resp.StatusCode)
			}
			r := &sseReader{r: bufio.NewReader(resp.Body)}
			var got []sseEvent
			for len(got) < 2 {
				ev, err := r.next()
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ev)
			}
			// The handler has replayed the backlog and waits: commit more,
			// in two batches, so it is woken more than once.
			log.add(msgEvent("a", "one"), msgEvent("a", "two"))
			for len(got) < 4 {
				ev, err := r.next()
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ev)
			}
			log.add(msgEvent("a", "three"), terminalEvent())
			got = append(got, readUntilEOF(t, r)...)

			if s := seqs(t, got); !reflect.DeepEqual(s, seqRange(2, 7)) {
				t.Fatalf("seqs = %v, want 2..7 once each", s)
			}
			wantTypes := []string{"chat.running", "speaker.selected", "message", "message", "message", "chat.completed"}
			for i, e := range got {
				if e.event != wantTypes[i] {
					t.Errorf("event %d type = %q, want %q", i, e.event, wantTypes[i])
				}
			}
			var m chat.Message
			if err := json.Unmarshal([]byte(got[4].data), &m); err != nil || m.Content != "three" || m.Seq != 6 {
				t.Errorf("message data %q: %+v, %v", got[4].data, m, err)
			}
		})
	}
}

// Resuming a finished chat from the middle replays the rest and closes.
func TestSSEResumeFinished(t *testing.T) {
	t.Parallel()
	_, srv := startServer(t, Config{}, finishedLog())
	resp := openStream(t, t.Context(), srv.URL+"/v1/chats/"+testChatID+"/events", "Last-Event-ID", "3")
	got := readUntilEOF(t, &sseReader{r: bufio.NewReader(resp.Body)})
	if s := seqs(t, got); !reflect.DeepEqual(s, []int64{4, 5}) {
		t.Fatalf("seqs = %v, want [4 5]", s)
	}
	// Seen everything: 204 makes an EventSource stop reconnecting.
	resp = openStream(t, t.Context(), srv.URL+"/v1/chats/"+testChatID+"/events", "Last-Event-ID", "5")
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("status after the end = %d, want 204", resp.StatusCode)
	}
}

// A log longer than one page of Events is streamed whole, in order.
func TestSSEPages(t *testing.T) {
	t.Parallel()
	log := newMemLog(chat.StatusRunning)
	n := 2*eventPageSize + 50
	for i := range n {
		log.add(msgEvent("a", strconv.Itoa(i)))
	}
	log.add(terminalEvent())
	_, srv := startServer(t, Config{}, log)
	resp := openStream(t, t.Context(), srv.URL+"/v1/chats/"+testChatID+"/events")
	got := readUntilEOF(t, &sseReader{r: bufio.NewReader(resp.Body)})
	if s := seqs(t, got); !reflect.DeepEqual(s, seqRange(1, int64(n)+1)) {
		t.Fatalf("got %d events, want %d in order", len(s), n+1)
	}
}

// Even if the runtime hands back events the client already has, none is sent twice.
func TestSSENoDuplicates(t *testing.T) {
	t.Parallel()
	log := finishedLog()
	chats := &fakeChats{
		get: log.Get,
		events: func(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.Event, error) {
			all, err := log.Events(ctx, tenant, id, 0, limit) // ignores after
			return all, err
		},
		subscribe: log.Subscribe,
	}
	_, srv := startServer(t, Config{}, chats)
	resp := openStream(t, t.Context(), srv.URL+"/v1/chats/"+testChatID+"/events?after=2")
	got := readUntilEOF(t, &sseReader{r: bufio.NewReader(resp.Body)})
	if s := seqs(t, got); !reflect.DeepEqual(s, []int64{3, 4, 5}) {
		t.Fatalf("seqs = %v, want [3 4 5]", s)
	}
}

func TestSSEHeartbeat(t *testing.T) {
	t.Parallel()
	log := newMemLog(chat.StatusRunning)
	log.add(chat.Event{Type: chat.EventChatCreated})
	_, srv := startServer(t, Config{Heartbeat: 5 * time.Millisecond}, log)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	resp := openStream(t, ctx, srv.URL+"/v1/chats/"+testChatID+"/events")
	r := &sseReader{r: bufio.NewReader(resp.Body)}
	if ev, err := r.next(); err != nil || ev.id != "1" {
		t.Fatalf("first event %+v, %v", ev, err)
	}
	for range 2 {
		ev, err := r.next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.comment != "heartbeat" || ev.id != "" || ev.event != "" {
			t.Fatalf("got %+v, want a heartbeat comment", ev)
		}
	}
	// The client goes away; the handler must end (goleak and srv.Close check it).
	cancel()
}

func TestSSEErrors(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Config{}, finishedLog())
	path := "/v1/chats/" + testChatID + "/events"
	for _, tt := range []struct {
		target string
		header []string
		status int
		path   string
	}{
		{path, []string{"Last-Event-ID", "abc"}, http.StatusBadRequest, "Last-Event-ID"},
		{path, []string{"Last-Event-ID", "-1"}, http.StatusBadRequest, "Last-Event-ID"},
		{path + "?after=x", nil, http.StatusBadRequest, "after"},
		{path + "?after=-3", nil, http.StatusBadRequest, "after"},
		{"/v1/chats/6f1b2f0c-0000-4000-8000-000000000000/events", nil, http.StatusNotFound, ""},
	} {
		p := decodeProblem(t, ts.do(t, http.MethodGet, tt.target, "", tt.header...), tt.status)
		if tt.path != "" && (len(p.Errors) != 1 || p.Errors[0].Path != tt.path) {
			t.Errorf("%s %v: errors = %+v", tt.target, tt.header, p.Errors)
		}
	}
}

func TestWriteSSE(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := writeSSE(&b, 0, "message.delta", []byte("{\"a\":1}")); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "event: message.delta\ndata: {\"a\":1}\n\n"; got != want {
		t.Errorf("ephemeral event = %q, want %q", got, want)
	}
	b.Reset()
	_ = writeSSE(&b, 9, "bad\r\nevent", []byte("line1\rid: 99\r\nline3\n"))
	if got, want := b.String(), "id: 9\nevent: badevent\ndata: line1\ndata: id: 99\ndata: line3\ndata: \n\n"; got != want {
		t.Errorf("line breaks: got %q, want %q", got, want)
	}
}

// FuzzWriteSSE checks that whatever the event name and data, writeSSE emits
// exactly one event that a client parses back to the same id, name and data.
func FuzzWriteSSE(f *testing.F) {
	f.Add(int64(1), "message", []byte(`{"content":"hi"}`))
	f.Add(int64(0), "message.delta", []byte("a\nb"))
	f.Add(int64(7), "x\ny", []byte("\r\r\n\n: comment\nid: 5"))
	f.Fuzz(func(t *testing.T, seq int64, event string, data []byte) {
		var b bytes.Buffer
		if err := writeSSE(&b, seq, event, data); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if !strings.HasSuffix(out, "\n\n") || strings.Contains(strings.TrimSuffix(out, "\n\n"), "\n\n") {
			t.Fatalf("not exactly one event block: %q", out)
		}
		// Parse as a client would: any of CR, LF, CRLF ends a line.
		lines := strings.Split(normalizeLineBreaks.Replace(strings.TrimSuffix(out, "\n\n")), "\n")
		var gotID, gotEvent string
		var gotData []string
		for _, line := range lines {
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "id":
				gotID = value
			case "event":
				gotEvent = value
			case "data":
				gotData = append(gotData, value)
			default:
				t.Fatalf("forged field %q in %q", field, out)
			}
		}
		wantID := ""
		if seq > 0 {
			wantID = strconv.FormatInt(seq, 10)
		}
		if gotID != wantID {
			t.Errorf("id = %q, want %q", gotID, wantID)
		}
		if want := lineBreaks.Replace(event); gotEvent != want {
			t.Errorf("event = %q, want %q", gotEvent, want)
		}
		if got, want := strings.Join(gotData, "\n"), normalizeLineBreaks.Replace(string(data)); got != want {
			t.Errorf("data = %q, want %q", got, want)
		}
	})
}

func TestMessages(t *testing.T) {
	t.Parallel()
	log := newMemLog(chat.StatusQueued)
	log.add(
		chat.Event{Type: chat.EventChatCreated},
		chat.Event{Type: chat.EventChatRunning},
		chat.Event{Type: chat.EventMessage, Role: chat.RoleUser, Name: chat.UserName, Content: "task", Data: json.RawMessage(`{"kind":"task"}`)},
		chat.Event{Type: chat.EventSpeakerSelected, Data: json.RawMessage(`{"agent":"x","method":"round_robin"}`)},
		chat.Event{Type: chat.EventMessage, Role: chat.RoleUser, Name: "x", Content: "exitcode: 0 (execution succeeded)\nCode output: hi",
			Data: json.RawMessage(`{"code_result":{"exit_code":0,"output":"hi"},"usage":{"prompt_tokens":3,"completion_tokens":4},"kind":"auto","turn":1}`)},
		terminalEvent(),
	)
	ts := newTestServer(t, Config{}, log)
	path := "/v1/chats/" + testChatID + "/messages"

	rec := ts.do(t, http.MethodGet, path, "")
	decodeJSON(t, rec, http.StatusOK)
	want := `{"messages":[` +
		`{"seq":3,"type":"TextMessage","role":"user","name":"user","content":"task","created_at":"2025-01-02T03:04:05Z"},` +
		`{"seq":5,"type":"TextMessage","role":"user","name":"x","content":"exitcode: 0 (execution succeeded)\nCode output: hi","code_result":{"exit_code":0,"output":"hi"},"usage":{"prompt_tokens":3,"completion_tokens":4},"created_at":"2025-01-02T03:04:05Z"}` +
		`],"last_seq":6,"status":"completed"}`
	if got := strings.TrimSpace(rec.Body.String()); got != want {
		t.Errorf("body\n got %s\nwant %s", got, want)
	}

	for _, tt := range []struct {
		query   string
		seqs    []float64
		lastSeq float64
	}{
		{"?limit=1", []float64{3}, 3},
		{"?after=3&limit=1", []float64{5}, 5},
		{"?after=5", nil, 6},
		// Past the end of the log: last_seq is the log's, not the after given.
		{"?after=100", nil, 6},
		// A terminal chat answers at once even when asked to wait.
		{"?after=6&wait_s=60", nil, 6},
	} {
		body := decodeJSON(t, ts.do(t, http.MethodGet, path+tt.query, ""), http.StatusOK)
		var got []float64
		for _, m := range body["messages"].([]any) {
			got = append(got, m.(map[string]any)["seq"].(float64))
		}
		if !reflect.DeepEqual(got, tt.seqs) || body["last_seq"] != tt.lastSeq {
			t.Errorf("%s: seqs %v last_seq %v, want %v %v", tt.query, got, body["last_seq"], tt.seqs, tt.lastSeq)
		}
	}

	for query, wantPaths := range map[string][]string{
		"after=-1":                  {"after"},
		"after=x&limit=0":           {"after", "limit"},
		"limit=1001":                {"limit"},
		"wait_s=soon":               {"wait_s"},
		"after=1&limit=2&wait_s=-5": {"wait_s"},
	} {
		p := decodeProblem(t, ts.do(t, http.MethodGet, path+"?"+query, ""), http.StatusBadRequest)
		var paths []string
		for _, e := range p.Errors {
			paths = append(paths, e.Path)
		}
		if !reflect.DeepEqual(paths, wantPaths) {
			t.Errorf("%s: problem paths = %v, want %v", query, paths, wantPaths)
		}
	}
	decodeProblem(t, ts.do(t, http.MethodGet, "/v1/chats/6f1b2f0c-0000-4000-8000-000000000000/messages", ""), http.StatusNotFound)
}

// A long poll with no message after `after` waits, and a commit wakes it.
func TestMessagesLongPollWakes(t *testing.T) {
	t.Parallel()
	log := newMemLog(chat.StatusQueued)
	log.add(chat.Event{Type: chat.EventChatCreated}, chat.Event{Type: chat.EventChatRunning})
	ts := newTestServer(t, Config{}, log)

	done := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		done <- ts.do(t, http.MethodGet, "/v1/chats/"+testChatID+"/messages?after=0&wait_s=60", "")
	}()
	log.waitSubscribed(t)
	// An event that is not a message keeps it waiting; the message ends it.
	log.add(chat.Event{Type: chat.EventSpeakerSelected, Data: json.RawMessage(`{"agent":"a","method":"round_robin"}`)})
	log.add(msgEvent("a", "finally"))
	select {
	case rec := <-done:
		body := decodeJSON(t, rec, http.StatusOK)
		msgs := body["messages"].([]any)
		if len(msgs) != 1 || msgs[0].(map[string]any)["content"] != "finally" || body["last_seq"] != float64(4) || body["status"] != "running" {
			t.Errorf("body = %v", body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the long poll was not woken by the commit")
	}
}

// A long poll that times out answers with what there is (nothing).
func TestMessagesLongPollTimesOut(t *testing.T) {
	t.Parallel()
	log := newMemLog(chat.StatusRunning)
	log.add(chat.Event{Type: chat.EventChatCreated})
	ts := newTestServer(t, Config{MaxWait: 20 * time.Millisecond}, log)
	body := decodeJSON(t, ts.do(t, http.MethodGet, "/v1/chats/"+testChatID+"/messages?wait_s=3600", ""), http.StatusOK)
	if len(body["messages"].([]any)) != 0 || body["last_seq"] != float64(1) || body["status"] != "running" {
		t.Errorf("body = %v", body)
	}
}

// TestSSEDeltas: fragments of a reply being streamed go out as
// message.delta events without an id, between the persisted events.
func TestSSEDeltas(t *testing.T) {
	t.Parallel()
	log := newMemLog(chat.StatusRunning)
	log.add(chat.Event{Type: chat.EventChatCreated})
	_, srv := startServer(t, Config{}, log)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	resp := openStream(t, ctx, srv.URL+"/v1/chats/"+testChatID+"/events")
	r := &sseReader{r: bufio.NewReader(resp.Body)}
	if ev, err := r.next(); err != nil || ev.id != "1" {
		t.Fatalf("first event %+v, %v", ev, err)
	}
	log.deltas.Push(chat.Delta{Name: "coder", Content: "stale", AfterSeq: 0}) // its reply was sent already
	log.deltas.Push(chat.Delta{Name: "coder", Content: "Hel", AfterSeq: 1})
	ev, err := r.next()
	if err != nil || ev.event != "message.delta" || ev.id != "" || ev.data != `{"name":"coder","content":"Hel"}` {
		t.Fatalf("delta event %+v, %v", ev, err)
	}
}

// The deltas of a reply, queued before its message was committed, go out
// before the message although they and the message's wake-up wait for the
// stream together.
func TestSSEDeltasGoBeforeTheirMessage(t *testing.T) {
	t.Parallel()
	log := newMemLog(chat.StatusRunning)
	log.add(chat.Event{Type: chat.EventChatCreated}, chat.Event{Type: chat.EventSpeakerSelected})
	_, srv := startServer(t, Config{}, log)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	resp := openStream(t, ctx, srv.URL+"/v1/chats/"+testChatID+"/events", lastEventIDHeader, "2")
	r := &sseReader{r: bufio.NewReader(resp.Body)}
	log.waitSubscribed(t)
	for seq := int64(2); seq < 40; seq++ {
		for _, piece := range []string{"Hel", "lo", " there"} {
			log.deltas.Push(chat.Delta{Name: "coder", Content: piece, AfterSeq: seq})
		}
		log.add(msgEvent("coder", "Hello there"))
		var text strings.Builder
		for {
			ev, err := r.next()
			if err != nil {
				t.Fatal(err)
			}
			if ev.event == "message.delta" {
				var d chat.Delta
				if err := json.Unmarshal([]byte(ev.data), &d); err != nil {
					t.Fatal(err)
				}
				text.WriteString(d.Content)
				continue
			}
			if ev.event == "message" && ev.id == strconv.FormatInt(seq+1, 10) {
				break
			}
			t.Fatalf("unexpected %+v", ev)
		}
		if text.String() != "Hello there" {
			t.Fatalf("message %d came after deltas %q, want all of its reply", seq+1, text.String())
		}
	}
}

// FuzzDeltaEvent checks that a stream's own encoding of a delta event is
// byte for byte what writeSSE makes of the delta's encoding/json encoding.
func FuzzDeltaEvent(f *testing.F) {
	f.Add("writer", "Hello <b>&</b> \"quoted\" \\ \n\r\t\b\f\x00\x1f\x7f", false)
	f.Add("", "\u2028\u2029 é 😀 \xff\xfe broken \xe2\x82", true)
	f.Add("a\nb", "", true)
	f.Fuzz(func(t *testing.T, name, content string, reset bool) {
		d := chat.Delta{Name: name, Content: content, Reset: reset, AfterSeq: 4}
		data, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := writeSSE(&want, 0, string(chat.EventMessageDelta), data); err != nil {
			t.Fatal(err)
		}
		if got := appendDeltaEvent(nil, d); string(got) != want.String() {
			t.Fatalf("delta event\n got %q\nwant %q", got, want.String())
		}
	})
}

// A stream writes the deltas that follow the last event sent, in one write,
// keeps those that follow later events, and drops those of replies sent.
func TestDeltaWriterWritesWhatFollows(t *testing.T) {
	t.Parallel()
	var dw deltaWriter
	var b bytes.Buffer
	pending := []chat.Delta{
		{Name: "a", Content: "old", AfterSeq: 2},
		{Name: "a", Content: "now", AfterSeq: 3},
		{Name: "b", Content: "later", AfterSeq: 5},
		{Name: "a", Reset: true, AfterSeq: 3},
	}
	wait, err := dw.write(&b, pending, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := "event: message.delta\ndata: {\"name\":\"a\",\"content\":\"now\"}\n\n" +
		"event: message.delta\ndata: {\"name\":\"a\",\"content\":\"\",\"reset\":true}\n\n"
	if b.String() != want {
		t.Errorf("written %q, want %q", b.String(), want)
	}
	if len(wait) != 1 || wait[0].Content != "later" {
		t.Errorf("waiting %+v, want the delta after seq 5", wait)
	}
}
