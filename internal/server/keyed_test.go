package server

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentd/agentd/internal/chat"
)

// TestKeyedPostsOnAChat: POST /runs, /fork, /stop and /input take an
// Idempotency-Key as POST /v1/chats does, with the real runtime and
// store: a repeat gets the first answer byte for byte, the key with
// another body is a 409 problem, counted, and a bad key is a 400 at the
// header before anything is done.
func TestKeyedPostsOnAChat(t *testing.T) {
	db := openStore(t)
	reg := prometheus.NewRegistry()
	rt := startRuntime(t, db, reg)
	ts := newTestServer(t, Config{}, rt)
	body := decodeJSON(t, ts.do(t, http.MethodPost, "/v1/chats?wait_s=30", `{"task": "go", "max_round": 1, "agents": [{"name": "a",
		"type": "assistant", "model": {"provider": "replay", "responses": ["r1", "r2", "r3"]}}]}`), http.StatusCreated)
	id := body["id"].(string)
	chatPath := "/v1/chats/" + id

	for _, op := range []string{"runs", "fork", "stop", "input"} {
		for _, key := range []string{strings.Repeat("k", 256), "clé"} {
			p := decodeProblem(t, ts.do(t, http.MethodPost, chatPath+"/"+op, `{}`, "Idempotency-Key", key), http.StatusBadRequest)
			if len(p.Errors) != 1 || p.Errors[0].Path != "Idempotency-Key" {
				t.Fatalf("POST /%s with key %q: %+v", op, key, p)
			}
		}
	}
	if c, err := rt.Get(t.Context(), "", id); err != nil || c.QueuedRuns != 0 || c.LastSeq != int64(body["last_seq"].(float64)) {
		t.Fatalf("the chat after requests with bad keys: %+v, %v", c, err)
	}

	run := `{"task": "again", "if_busy": "enqueue"}`
	first := ts.do(t, http.MethodPost, chatPath+"/runs", run, "Idempotency-Key", "r")
	if first.Code != http.StatusAccepted {
		t.Fatalf("keyed POST /runs: %d %s", first.Code, first.Body)
	}
	for range 2 {
		again := ts.do(t, http.MethodPost, chatPath+"/runs", run, "Idempotency-Key", "r")
		if again.Code != http.StatusAccepted || !bytes.Equal(again.Body.Bytes(), first.Body.Bytes()) {
			t.Fatalf("repeat: %d %s\nwant %s", again.Code, again.Body, first.Body)
		}
	}
	p := decodeProblem(t, ts.do(t, http.MethodPost, chatPath+"/runs", `{"task": "other"}`, "Idempotency-Key", "r"), http.StatusConflict)
	if p.Type != "urn:agentd:problem:conflict" || !strings.Contains(p.Detail, "Idempotency-Key") {
		t.Fatalf("the key with another body: %+v", p)
	}
	fork := `{"run": {"task": "forked"}}`
	f1 := ts.do(t, http.MethodPost, chatPath+"/fork", fork, "Idempotency-Key", "r") // a key of runs is not one of forks
	f2 := ts.do(t, http.MethodPost, chatPath+"/fork", fork, "Idempotency-Key", "r")
	if f1.Code != http.StatusCreated || f2.Code != http.StatusCreated || !bytes.Equal(f1.Body.Bytes(), f2.Body.Bytes()) ||
		f1.Header().Get("Location") != f2.Header().Get("Location") {
		t.Fatalf("keyed fork twice:\n%d %s\n%d %s", f1.Code, f1.Body, f2.Code, f2.Body)
	}
	chats, _, err := db.ListChats(t.Context(), &chat.ListChatsParams{Limit: 10})
	if err != nil || len(chats) != 2 {
		t.Fatalf("%d chats, want the chat and one fork (%v)", len(chats), err)
	}
	for op, want := range map[string]float64{"runs": 2, "fork": 1} {
		if got := keyedCount(t, reg, op, "repeated"); got != want {
			t.Errorf("agentd_keyed_requests_total{op=%q,outcome=\"repeated\"} = %v, want %v", op, got, want)
		}
	}
	if got := keyedCount(t, reg, "runs", "conflict"); got != 1 {
		t.Errorf("agentd_keyed_requests_total{op=\"runs\",outcome=\"conflict\"} = %v, want 1", got)
	}
}

// keyedCount reads agentd_keyed_requests_total{op, outcome} (0 if absent).
func keyedCount(t *testing.T, reg prometheus.Gatherer, op, outcome string) float64 {
	t.Helper()
	v, _ := metric(t, reg, "agentd_keyed_requests_total", map[string]string{"op": op, "outcome": outcome})
	return v
}
