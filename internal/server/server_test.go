package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/store/pgtest"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/chat"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(fanOutReaderEnv); url != "" {
		// This process reads BenchmarkSSEFanOut's streams.
		os.Exit(fanOutReader(url))
	}
	goleak.VerifyTestMain(pgtest.Wrap(m))
}

// The runtime must keep satisfying the interface the handlers are written against.
var _ Chats = (*runtime.Runtime)(nil)

// fakeChats is a Chats whose methods are the funcs a test sets. A method
// without a func falls through to the nil embedded interface and panics,
// which the recoverer turns into a 500: a test that calls something it did
// not expect fails loudly.
type fakeChats struct {
	Chats
	create    func(ctx context.Context, p *chat.CreateParams) (*chat.Chat, bool, error)
	get       func(ctx context.Context, tenant, id string) (*chat.Chat, error)
	list      func(ctx context.Context, p *chat.ListChatsParams) ([]*chat.Chat, string, error)
	events    func(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.Event, error)
	subscribe func(chatID string) (<-chan runtime.Wake, func())
	cancel    func(ctx context.Context, tenant, id string) (*chat.Chat, bool, error)
	input     func(ctx context.Context, tenant, id, key string, in *chat.Input) (*chat.Chat, error)
	ready     func() bool
}

func (f *fakeChats) Create(ctx context.Context, p *chat.CreateParams) (*chat.Chat, bool, error) {
	if f.create == nil {
		return f.Chats.Create(ctx, p)
	}
	return f.create(ctx, p)
}

func (f *fakeChats) Get(ctx context.Context, tenant, id string) (*chat.Chat, error) {
	if f.get == nil {
		return f.Chats.Get(ctx, tenant, id)
	}
	return f.get(ctx, tenant, id)
}

// Progress of the fakes is derived from their Get.
func (f *fakeChats) Progress(ctx context.Context, tenant, id string) (chat.Progress, error) {
	c, err := f.Get(ctx, tenant, id)
	if err != nil {
		return chat.Progress{}, err
	}
	return chat.Progress{Status: c.Status, LastSeq: c.LastSeq, InputAnswered: len(c.InputResponse) > 0}, nil
}

func (l *memLog) Progress(ctx context.Context, tenant, id string) (chat.Progress, error) {
	c, err := l.Get(ctx, tenant, id)
	if err != nil {
		return chat.Progress{}, err
	}
	return chat.Progress{Status: c.Status, LastSeq: c.LastSeq, InputAnswered: len(c.InputResponse) > 0}, nil
}

func (f *fakeChats) List(ctx context.Context, p *chat.ListChatsParams) ([]*chat.Chat, string, error) {
	if f.list == nil {
		return f.Chats.List(ctx, p)
	}
	return f.list(ctx, p)
}

func (f *fakeChats) Events(ctx context.Context, tenant, id string, after int64, limit int) ([]chat.Event, error) {
	if f.events == nil {
		return f.Chats.Events(ctx, tenant, id, after, limit)
	}
	return f.events(ctx, tenant, id, after, limit)
}

// Stream of the fakes subscribes as Subscribe does; no model runs behind
// them, so no delta comes.
func (f *fakeChats) Stream(chatID string) (<-chan runtime.Wake, *runtime.DeltaQueue, func()) {
	ch, stop := f.Subscribe(chatID)
	return ch, runtime.NewDeltaQueue(), stop
}

// Stream of memLog queues on l.deltas what a test pushes there.
func (l *memLog) Stream(chatID string) (<-chan runtime.Wake, *runtime.DeltaQueue, func()) {
	ch, stop := l.Subscribe(chatID)
	return ch, l.deltas, stop
}

func (f *fakeChats) Subscribe(chatID string) (<-chan runtime.Wake, func()) {
	if f.subscribe == nil {
		return f.Chats.Subscribe(chatID)
	}
	return f.subscribe(chatID)
}

func (f *fakeChats) Follow(chatID string) (runtime.Wake, <-chan runtime.Wake, func()) {
	if f.subscribe == nil {
		return f.Chats.Follow(chatID)
	}
	ch, stop := f.subscribe(chatID)
	return runtime.Wake{}, ch, stop
}

func (f *fakeChats) Cancel(ctx context.Context, tenant, id string) (*chat.Chat, bool, error) {
	if f.cancel == nil {
		return f.Chats.Cancel(ctx, tenant, id)
	}
	return f.cancel(ctx, tenant, id)
}

func (f *fakeChats) Input(ctx context.Context, tenant, id, key string, in *chat.Input) (*chat.Chat, error) {
	if f.input == nil {
		return f.Chats.Input(ctx, tenant, id, key, in)
	}
	return f.input(ctx, tenant, id, key, in)
}

func (f *fakeChats) Ready() bool {
	if f.ready == nil {
		return true
	}
	return f.ready()
}

// memLog is a Chats holding one chat and its log in memory, with working
// subscriptions: enough to test streaming and long polls end to end.
type memLog struct {
	Chats
	mu     sync.Mutex
	chat   chat.Chat
	events []chat.Event
	subs   map[chan runtime.Wake]struct{}
	// subscribed receives a value after every Subscribe, so a test can act
	// once a handler is waiting instead of sleeping.
	subscribed chan struct{}
	// eventCalls counts Events calls.
	eventCalls int
	// deltas feeds message.delta events to streams.
	deltas *runtime.DeltaQueue
}

const (
	testChatID = "0b7f3a52-8a3e-4f0e-9a52-6f1b2f0c9d11"
	testTenant = DefaultTenant
)

var testTime = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func newMemLog(status chat.Status) *memLog {
	return &memLog{
		chat:       chat.Chat{ID: testChatID, Tenant: testTenant, Status: status, CreatedAt: testTime, UpdatedAt: testTime},
		subs:       map[chan runtime.Wake]struct{}{},
		subscribed: make(chan struct{}, 100),
		deltas:     runtime.NewDeltaQueue(),
	}
}

// add appends events with the next seqs, updates the chat as a worker would
// (terminal events end it) and wakes every subscriber.
func (l *memLog) add(events ...chat.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range events {
		e.ChatID = l.chat.ID
		e.Seq = int64(len(l.events)) + 1
		if e.CreatedAt.IsZero() {
			e.CreatedAt = testTime
		}
		l.events = append(l.events, e)
		l.chat.LastSeq = e.Seq
		switch e.Type {
		case chat.EventMessage:
			l.chat.MessageCount++
		case chat.EventChatRunning:
			l.chat.Status = chat.StatusRunning
		case chat.EventChatCompleted:
			l.chat.Status = chat.StatusCompleted
		case chat.EventChatFailed:
			l.chat.Status = chat.StatusFailed
		case chat.EventChatCancelled:
			l.chat.Status = chat.StatusCancelled
		}
	}
	for ch := range l.subs {
		select {
		case ch <- runtime.Wake{}:
		default: // coalesced: a wake-up is already pending
		}
	}
}

func (l *memLog) Get(_ context.Context, tenant, id string) (*chat.Chat, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if id != l.chat.ID || tenant != l.chat.Tenant {
		return nil, chat.ErrNotFound
	}
	c := l.chat
	return &c, nil
}

func (l *memLog) Events(_ context.Context, tenant, id string, after int64, limit int) ([]chat.Event, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.eventCalls++
	if id != l.chat.ID || tenant != l.chat.Tenant {
		return nil, chat.ErrNotFound
	}
	var out []chat.Event
	for _, e := range l.events {
		if e.Seq > after && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

func (l *memLog) Subscribe(chatID string) (<-chan runtime.Wake, func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := make(chan runtime.Wake, 1)
	l.subs[ch] = struct{}{}
	l.subscribed <- struct{}{}
	return ch, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.subs, ch)
	}
}

func (l *memLog) Follow(chatID string) (runtime.Wake, <-chan runtime.Wake, func()) {
	ch, stop := l.Subscribe(chatID)
	return runtime.Wake{}, ch, stop
}

func (l *memLog) Ready() bool { return true }

// waitSubscribed blocks until a handler has subscribed.
func (l *memLog) waitSubscribed(t *testing.T) {
	t.Helper()
	select {
	case <-l.subscribed:
	case <-time.After(10 * time.Second):
		t.Fatal("no handler subscribed")
	}
}

// msgEvent returns a message event from name with content.
func msgEvent(name, content string) chat.Event {
	return chat.Event{Type: chat.EventMessage, Role: chat.RoleAssistant, Name: name, Content: content}
}

// terminalEvent returns a chat.completed event as the runtime writes it.
func terminalEvent() chat.Event {
	return chat.Event{Type: chat.EventChatCompleted,
		Data: json.RawMessage(`{"status":"completed","stop_reason":"max_round","stop_detail":"Maximum number of turns 2 reached."}`)}
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testServer is a Server with its registry and log.
type testServer struct {
	*Server
	reg *prometheus.Registry
	log *syncBuffer
}

func newTestServer(t *testing.T, cfg Config, chats Chats) *testServer {
	t.Helper()
	reg := prometheus.NewRegistry()
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := New(cfg, chats, logger, reg, reg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &testServer{Server: s, reg: reg, log: logs}
}

// do serves one request in process and returns the recorded response.
func (ts *testServer) do(t *testing.T, method, target string, body string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, rd)
	if body != "" {
		// What every client of the API sends; tests of the check override it.
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	ts.Handler().ServeHTTP(rec, req)
	return rec
}

// decodeProblem checks that rec is a problem+json with the status and returns it.
func decodeProblem(t *testing.T, rec *httptest.ResponseRecorder, status int) problem {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status = %d, want %d; body %s", rec.Code, status, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != problemContentType {
		t.Fatalf("Content-Type = %q, want %q", ct, problemContentType)
	}
	var p problem
	dec := json.NewDecoder(rec.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("decode problem: %v", err)
	}
	if p.Status != status || p.Title != http.StatusText(status) || !strings.HasPrefix(p.Type, problemTypePrefix) || p.Errors == nil {
		t.Fatalf("malformed problem: %+v", p)
	}
	return p
}

// decodeJSON checks the status and JSON content type of rec and decodes its body into a map.
func decodeJSON(t *testing.T, rec *httptest.ResponseRecorder, status int) map[string]any {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status = %d, want %d; body %s", rec.Code, status, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json", ct)
	}
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("decode body %s: %v", rec.Body, err)
	}
	return m
}

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	_, err := New(Config{MaxBodyBytes: -1, Heartbeat: -1, MaxWait: -1, APIKeys: map[string]string{"": "t", "k": "", " k2": "t"}}, nil, nil, nil, nil)
	if err == nil {
		t.Fatal("New accepted an invalid config")
	}
	for _, want := range []string{"max body bytes", "heartbeat", "max wait", "API key is empty", "empty tenant", "white space", "chats is required", "registerer is required", "gatherer is required"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not report %q", err, want)
		}
	}
	if _, err := New(Config{}, &fakeChats{}, nil, reg, reg); err != nil {
		t.Fatalf("New with defaults: %v", err)
	}
	// The metrics are registered on the injected registry: a second server
	// on the same one is an error, a second server on its own registry is fine.
	if _, err := New(Config{}, &fakeChats{}, nil, reg, reg); err == nil {
		t.Fatal("second server on the same registry: want a registration error")
	}
	other := prometheus.NewRegistry()
	if _, err := New(Config{}, &fakeChats{}, nil, other, other); err != nil {
		t.Fatalf("server on a second registry: %v", err)
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	c := Config{}.withDefaults()
	if c.MaxBodyBytes != 1<<20 || c.Heartbeat != 15*time.Second || c.MaxWait != 60*time.Second {
		t.Fatalf("defaults = %+v", c)
	}
}
