//go:build !race

// The race detector adds to every frame and doubles the runtime's stack
// guard, so under it no waiting chat's stack can be halved: this test runs
// without it (make test-go runs it so).

package runtime_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	goruntime "runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/runtime/runtimetest"
)

// A chat waiting on its model waits under frames small enough for the
// garbage collector to halve its goroutine's stack, from the 8 KB its
// turns grow it to, to 4 KB. The collector halves a stack when what its
// goroutine uses, with the runtime's guard of 800 bytes, is less than a
// quarter of it: the frames a waiting chat waits under must stay within
// 1,248 bytes. A local added to one of them, or a value passed where a
// pointer was, can double the stack of every waiting chat; this test says
// so. What the collector scans of a parked goroutine's stack is what it
// uses, so the test reads that from the runtime's metrics.
//
// A chat with a timeout condition waits under the same frames: the
// deadline's context is kept on the worker, not in a frame of the step.
func TestAWaitingChatsStackIsHalved(t *testing.T) {
	for _, c := range []struct{ name, extra string }{
		{"no timeout", ""},
		{"timeout_s", `, "termination": {"timeout_s": 600}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			const n = 256
			db := runtimetest.OpenSQLite(t)
			rt := runtimetest.New(t, db, func(c *runtime.Config) { c.LeaseDuration = 30 * time.Second })
			settle(t)
			_, inuse0 := stacks()
			ids := startWaitingChats(t, rt, db, n, c.extra)
			settle(t)
			stacks() // a stack is halved at most once a collection
			used, inuse1 := waitersStack(t, rt, ids)
			t.Logf("a waiting chat's goroutine uses %.0f bytes of its stack; stacks in use grew by %.0f bytes per chat",
				used, (float64(inuse1)-float64(inuse0))/n)
			if used >= 8<<10/4-800 {
				t.Errorf("a waiting chat's goroutine uses %.0f bytes of its stack: with the runtime's guard, a quarter of 8 KB or more, so its stack is not halved", used)
			}
		})
	}
}

// A chat waiting in a streamed reply of a model on the OpenAI wire, which
// is where a chat on a hosted model spends its life, reads the reply's
// body under frames small enough that its stack is 8 KB, not 16 KB. A turn
// may grow it to 16 KB; the collector halves it back when what it uses at
// the wait, with the runtime's guard of 800 bytes, is less than 4 KB
// (3,296 bytes of frames). The model here is a transport that sends each
// reply's headers and first token and holds the rest: the chats wait in
// the read of the body, and no connection's goroutines are counted with
// them. net/http reads an HTTP/1.1 body under about 1 KB more frames than
// this transport's body does (HTTP/2: less), so what the test measures
// must stay under 2,250 bytes.
func TestAChatWaitingInAStreamedReplyKeepsAnEightKBStack(t *testing.T) {
	for _, w := range []struct {
		provider, first string
		config          llm.Config
	}{
		{"openai", `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}` + "\n\n",
			llm.Config{OpenAI: llm.OpenAIConfig{BaseURL: "http://model.test/v1", APIKey: "k"}}},
		{"anthropic", "event: message_start\n" +
			`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":1}}}` + "\n\n" +
			"event: content_block_start\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
			"event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}` + "\n\n",
			llm.Config{Anthropic: llm.AnthropicConfig{BaseURL: "http://model.test", APIKey: "k"}}},
	} {
		t.Run(w.provider, func(t *testing.T) {
			const n = 256
			held := &heldReplies{first: w.first, waiting: make(chan struct{}, n)}
			w.config.OpenAI.HTTPClient = &http.Client{Transport: held}
			models, err := llm.New(w.config)
			if err != nil {
				t.Fatal(err)
			}
			db := runtimetest.OpenSQLite(t)
			rt := runtimetest.New(t, db, func(c *runtime.Config) {
				c.LeaseDuration = 30 * time.Second
				c.Models, c.Providers = models, models.Providers()
			})
			spec := fmt.Appendf(nil, `{"task": "t", "max_round": 1,
				"agents": [{"name": "writer", "type": "assistant", "model": {"provider": %q, "model": "m"}}]}`, w.provider)
			settle(t)
			var ids []string
			for range n {
				c, _, err := rt.Create(context.Background(), &chat.CreateParams{Body: spec})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, c.ID)
			}
			for range n {
				<-held.waiting
			}
			settle(t) // the held selections' flushes, on goroutines of their own, are done
			used, _ := waitersStack(t, rt, ids)
			t.Logf("a chat waiting in a streamed reply uses %.0f bytes of its stack", used)
			if used >= 2250 {
				t.Errorf("a chat waiting in a streamed reply uses %.0f bytes of its stack; with net/http's frames that is 4 KB or more, so its stack is 16 KB", used)
			}
		})
	}
}

// heldReplies is a transport whose every reply is a stream that sends its
// headers and first token, then holds the rest until the call is cut.
type heldReplies struct {
	first   string
	waiting chan struct{}
}

func (h *heldReplies) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/event-stream"}}, Request: r,
		Body: &heldBody{ctx: r.Context(), waiting: h.waiting, first: []byte(h.first)}}, nil
}

type heldBody struct {
	ctx     context.Context
	waiting chan<- struct{}
	first   []byte
}

func (b *heldBody) Read(p []byte) (int, error) {
	if len(b.first) > 0 {
		n := copy(p, b.first)
		b.first = b.first[n:]
		return n, nil
	}
	if b.waiting != nil {
		b.waiting <- struct{}{}
		b.waiting = nil
	}
	<-b.ctx.Done()
	return 0, b.ctx.Err()
}

func (b *heldBody) Close() error { return nil }

// waitersStack returns how much stack each of the chats ids, all waiting,
// uses: what a collection scans less what one scans once they are
// cancelled and their workers gone, per chat, so that the runtime's other
// goroutines are not counted. inuse is the stack in use while they wait.
func waitersStack(t *testing.T, rt *runtime.Runtime, ids []string) (used float64, inuse uint64) {
	t.Helper()
	scanned, inuse := stacks()
	g := goruntime.NumGoroutine()
	for _, id := range ids {
		if _, _, err := rt.Cancel(context.Background(), "", id); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); goruntime.NumGoroutine() > g-len(ids); {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, %d after cancelling %d chats", g, goruntime.NumGoroutine(), len(ids))
		}
		time.Sleep(10 * time.Millisecond)
	}
	after, _ := stacks()
	return (float64(scanned) - float64(after)) / float64(len(ids)), inuse
}

// settle waits until the goroutines of the tests before (servers, runtimes
// shutting down) are gone: the number of goroutines stays the same for a
// while. One that ended while the chats waited would count as theirs.
func settle(t *testing.T) {
	t.Helper()
	n, same := goruntime.NumGoroutine(), 0
	for deadline := time.Now().Add(5 * time.Second); same < 5 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		if m := goruntime.NumGoroutine(); m != n {
			n, same = m, 0
			continue
		}
		same++
	}
}

// stacks collects garbage, then returns how much stack the collection
// scanned (what the goroutines use) and how much is in use (what they
// hold).
func stacks() (scanned, inuse uint64) {
	goruntime.GC()
	s := []metrics.Sample{{Name: "/gc/scan/stack:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}
