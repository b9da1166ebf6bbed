package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// A stream that drops is resumed after the last id received: every event
// reaches the callback once, in order, deltas included, and the follow ends
// when the stream ends cleanly after a terminal event (an earlier run's,
// replayed, does not end it).
func TestFollowResumesAfterADrop(t *testing.T) {
	t.Parallel()
	var conns atomic.Int32
	var lastIDs []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chats/c1/events" || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
		w.Header().Set("Content-Type", "text/event-stream")
		switch conns.Add(1) {
		case 1:
			fmt.Fprint(w, "id: 1\nevent: chat.created\ndata: {}\n\n: heartbeat\n\n")
			fmt.Fprint(w, "event: message.delta\ndata: {\"name\":\"a\",\n")
			fmt.Fprint(w, "data: \"content\":\"x\"}\n\nid: 2\nevent: message\ndata: {\"seq\":2}\n\nid: 3\nevent: mess")
			// The connection drops in the middle of event 3.
		default:
			// Run 1's end, replayed, does not end the follow: the stream
			// goes on with run 2 and ends cleanly after its end.
			fmt.Fprint(w, "id: 3\r\nevent: message\r\ndata: {\"seq\":3}\r\n\r\nid: 4\nevent: chat.completed\ndata: {\"status\":\"completed\",\"run\":1}\n\n")
			fmt.Fprint(w, "id: 5\nevent: run.started\ndata: {\"run\":2}\n\nid: 6\nevent: chat.failed\ndata: {\"status\":\"failed\",\"run\":2}\n\n")
		}
	}))
	defer srv.Close()
	c, err := New(srv.URL, "k", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	err = c.Follow(context.Background(), "c1", 0, time.Millisecond, func(e Event) error {
		got = append(got, fmt.Sprintf("%d %s %s", e.ID, e.Event, e.Data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`1 chat.created {}`, "0 message.delta {\"name\":\"a\",\n\"content\":\"x\"}", `2 message {"seq":2}`,
		`3 message {"seq":3}`, `4 chat.completed {"status":"completed","run":1}`, `5 run.started {"run":2}`, `6 chat.failed {"status":"failed","run":2}`}
	if !slices.Equal(got, want) {
		t.Errorf("events\n got %q\nwant %q", got, want)
	}
	if !slices.Equal(lastIDs, []string{"0", "2"}) {
		t.Errorf("Last-Event-ID headers %q, want 0 then 2", lastIDs)
	}
}

// Error answers become a *Problem with every field problem; a 4xx on the
// stream is not retried.
func TestProblems(t *testing.T) {
	t.Parallel()
	var streams atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "want JSON", http.StatusUnsupportedMediaType)
			return
		}
		if r.URL.Path == "/v1/chats/gone/events" {
			streams.Add(1)
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprint(w, `{"type":"urn:agentd:problem:validation-failed","title":"Unprocessable Entity","status":422,"detail":"2 problems","errors":[{"path":"/task","message":"is required"},{"path":"/agents/0/name","message":"bad"}]}`)
	}))
	defer srv.Close()
	c, _ := New(srv.URL, "", srv.Client())
	_, err := c.Create(context.Background(), []byte(`{}`))
	var p *Problem
	if !errors.As(err, &p) || p.Status != 422 || len(p.Errors) != 2 || p.Errors[1].Path != "/agents/0/name" {
		t.Fatalf("err = %v", err)
	}
	if _, err := c.Cancel(context.Background(), "x"); !errors.As(err, &p) || p.Status != 422 {
		t.Errorf("cancel: %v (a body of JSON is sent)", err)
	}
	err = c.Follow(context.Background(), "gone", 0, time.Millisecond, func(Event) error { return nil })
	if !errors.As(err, &p) || streams.Load() != 1 {
		t.Errorf("follow: %v after %d requests", err, streams.Load())
	}
	if _, err := New("localhost:8080", "", nil); err == nil {
		t.Error("a URL without a scheme was accepted")
	}
}
