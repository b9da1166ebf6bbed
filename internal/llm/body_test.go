package llm

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"

	"github.com/agentd/agentd/internal/chat"
)

// heldStream is a model server that answers every request, once it has
// read its body, with a stream that sends its headers and first token and
// holds the rest until the call is cut: calls waiting in the middle of
// their replies, over net/http's own transport, which keeps each request
// while its response is read.
func heldStream(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}`+"\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A call waiting in a streamed reply does not keep its request's body:
// net/http keeps the request while the response is read, and the body is
// the whole encoded history. The server's and the connections' own
// buffers count too: a few KB a call. Sixteen calls on a history of 256 KB each
// would keep 4 MB of bodies; they must keep less than a quarter of one
// each.
func TestAStreamedCallLetsGoOfItsRequestBody(t *testing.T) {
	const n, size = 16, 256 << 10
	srv := heldStream(t)
	c, err := New(Config{OpenAI: OpenAIConfig{APIKey: "k", BaseURL: srv.URL + "/v1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	history := strings.Repeat("a sentence of the history ", size/26)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	before := liveHeap()
	streaming := make(chan struct{}, n)
	var wg sync.WaitGroup
	for range n {
		req := openaiRequest(chat.ModelMessage{Role: "user", Name: "user", Content: history})
		var once sync.Once
		req.OnDelta = func(string) { once.Do(func() { streaming <- struct{}{} }) }
		wg.Go(func() { _, _ = c.Complete(ctx, req) })
	}
	for range n {
		<-streaming
	}
	per := (float64(liveHeap()) - float64(before)) / n
	cancel()
	wg.Wait()
	t.Logf("a call waiting in a streamed reply on a %d KB history keeps %.1f KB", size>>10, per/1024)
	if per >= size/4 {
		t.Errorf("a call waiting in a streamed reply keeps %.1f KB of heap on a %d KB history: its request body is kept", per/1024, size>>10)
	}
}

func liveHeap() uint64 {
	goruntime.GC()
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return m.HeapAlloc
}

// resending reads each request's body, then the body GetBody makes, as
// net/http does to send a request again, and records whether they differ.
type resending struct {
	cannedStream
	mu    sync.Mutex
	sent  [][2][]byte
	noGet bool
}

func (r *resending) RoundTrip(req *http.Request) (*http.Response, error) {
	first, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if req.GetBody == nil {
		r.noGet = true
	} else {
		rc, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		again, err := io.ReadAll(rc)
		if err != nil {
			return nil, err
		}
		r.sent = append(r.sent, [2][]byte{first, again})
	}
	return r.cannedStream.RoundTrip(req)
}

// A streamed call's body that net/http must send again (a connection that
// went away before the server took the request) is encoded again from the
// call: the same bytes.
func TestAStreamedCallsBodySentAgainIsTheSame(t *testing.T) {
	tr := &resending{cannedStream: cannedStream(streamedReply(3))}
	c, err := New(Config{OpenAI: OpenAIConfig{APIKey: "k", BaseURL: "http://model.invalid/v1", HTTPClient: &http.Client{Transport: tr}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	req := openaiRequest()
	req.OnDelta = func(string) {}
	if _, err := c.Complete(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if tr.noGet || len(tr.sent) != 1 {
		t.Fatalf("GetBody missing (%v), or %d requests, want 1", tr.noGet, len(tr.sent))
	}
	if first, again := tr.sent[0][0], tr.sent[0][1]; len(first) == 0 || !bytes.Equal(first, again) {
		t.Fatalf("body sent again differs:\n%s\n%s", first, again)
	}
}

// A rewritten body (Swarm's wire) is rewritten again when it is sent
// again, and lets go of its bytes once read.
func TestRewrittenBodyIsRewrittenWhenSentAgain(t *testing.T) {
	r, err := http.NewRequest(http.MethodPost, "http://model.invalid/", bytes.NewReader([]byte("abc")))
	if err != nil {
		t.Fatal(err)
	}
	if err := rewriteBody(r, func(b []byte) ([]byte, error) { return bytes.ToUpper(b), nil }); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r.Body)
	if err != nil || string(got) != "ABC" || r.ContentLength != 3 {
		t.Fatalf("body %q (%v), length %d; want ABC, 3", got, err, r.ContentLength)
	}
	if b, _ := r.Body.(interface{ Len() int }); b != nil && b.Len() > 0 {
		t.Fatalf("a body read to its end still holds %d bytes", b.Len())
	}
	rc, err := r.GetBody()
	if err != nil {
		t.Fatal(err)
	}
	if again, err := io.ReadAll(rc); err != nil || string(again) != "ABC" {
		t.Fatalf("body sent again %q (%v), want ABC", again, err)
	}
}
