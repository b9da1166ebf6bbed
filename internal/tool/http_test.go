package tool_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/tool"
)

func TestHTTPCallRequest(t *testing.T) {
	t.Parallel()
	type seen struct {
		method, contentType, key, apiKey string
		body                             map[string]any
	}
	got := make(chan seen, 1)
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		err := json.NewDecoder(r.Body).Decode(&body)
		if err != nil {
			t.Errorf("decode body: %v", err)
		}
		got <- seen{r.Method, r.Header.Get("Content-Type"), r.Header.Get("Idempotency-Key"), r.Header.Get("X-Api-Key"), body}
		io.WriteString(w, "result text\n")
	})
	r := newRunner(t, tool.Config{AllowPrivate: true})
	res := r.Call(context.Background(), request(httpTool(srv.URL+"/search", `"headers":{"X-Api-Key":"secret"}`), `{"q": "go", "n": 3}`))
	if res.IsError || res.Content != "result text\n" {
		t.Fatalf("result = %+v", res)
	}
	s := <-got
	if s.method != http.MethodPost || s.contentType != "application/json" || s.apiKey != "secret" {
		t.Errorf("method %s, content type %q, X-Api-Key %q", s.method, s.contentType, s.apiKey)
	}
	if s.key != "chat-1/call_1" {
		t.Errorf("Idempotency-Key = %q, want chat-1/call_1", s.key)
	}
	want := map[string]any{"name": "search", "arguments": map[string]any{"q": "go", "n": 3.0}, "chat_id": "chat-1", "tool_call_id": "call_1"}
	if b, w := mustJSON(t, s.body), mustJSON(t, want); b != w {
		t.Errorf("body = %s, want %s", b, w)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestHTTPCallFailures covers the ways a tool server can fail a call.
func TestHTTPCallFailures(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/hang":
			// Until the client gives up. The server notices a closed
			// connection only once the body has been read.
			io.Copy(io.Discard, r.Body)
			select {
			case <-r.Context().Done():
			case <-release:
			}
		case "/500":
			http.Error(w, "database is down\n"+strings.Repeat("detail ", 200), http.StatusInternalServerError)
		case "/404":
			w.WriteHeader(http.StatusNotFound)
		case "/10mb": // announced by Content-Length
			w.Header().Set("Content-Length", strconv.Itoa(10<<20))
			w.Write(make([]byte, 10<<20))
		case "/10mb-chunked": // not announced: counted while read
			w.Write([]byte("x"))
			w.(http.Flusher).Flush()
			for range 10 {
				if _, err := w.Write(make([]byte, 1<<20)); err != nil {
					return
				}
			}
		case "/exact":
			w.Write(make([]byte, 1<<20))
		}
	})
	t.Cleanup(func() { close(release) }) // runs before srv.Close: cleanups run last first
	r := newRunner(t, tool.Config{AllowPrivate: true})
	tests := []struct {
		path, impl string
		want       []string
	}{
		{"/hang", `"timeout_s":0.2`, []string{"Error: timed out after 0.2s"}},
		{"/500", "", []string{"Error: HTTP 500 Internal Server Error: database is down", " …"}},
		{"/404", "", []string{"Error: HTTP 404 Not Found"}},
		{"/10mb", "", []string{"Error: response exceeds 1048576 bytes"}},
		{"/10mb-chunked", "", []string{"Error: response exceeds 1048576 bytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()
			res := r.Call(context.Background(), request(httpTool(srv.URL+tt.path, tt.impl), `{"q":"a"}`))
			wantError(t, res, tt.want...)
			if len(res.Content) > 1000 {
				t.Errorf("error content is %d bytes long", len(res.Content))
			}
		})
	}
	t.Run("exactly the limit", func(t *testing.T) {
		t.Parallel()
		res := r.Call(context.Background(), request(httpTool(srv.URL+"/exact", ""), `{"q":"a"}`))
		if res.IsError || len(res.Content) != 1<<20 {
			t.Errorf("a body of exactly MaxResponseBytes: error %v, %d bytes", res.IsError, len(res.Content))
		}
	})
	t.Run("timeout capped by MaxTimeout", func(t *testing.T) {
		t.Parallel()
		r := newRunner(t, tool.Config{AllowPrivate: true, DefaultTimeout: 100e6, MaxTimeout: 300e6})
		wantError(t, r.Call(context.Background(), request(httpTool(srv.URL+"/hang", `"timeout_s":3600`), `{"q":"a"}`)), "Error: timed out after 0.3s")
		wantError(t, r.Call(context.Background(), request(httpTool(srv.URL+"/hang", ""), `{"q":"a"}`)), "Error: timed out after 0.1s")
	})
	t.Run("cancelled by the caller", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		wantError(t, r.Call(ctx, request(httpTool(srv.URL+"/hang", ""), `{"q":"a"}`)), "Error: the call was cancelled")
	})
}

// TestHTTPRefusesPrivateAddresses: without AllowPrivate, a tool server on
// the loopback interface is refused before any request reaches it, whether
// the URL names the address or localhost (both already refused when the
// spec is checked; a name resolving there, or a redirect, by the dialer).
func TestHTTPRefusesPrivateAddresses(t *testing.T) {
	t.Parallel()
	srv, hits := countingServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	r := newRunner(t, tool.Config{})
	probs := r.CheckTool(httpTool(srv.URL, ""))
	if len(probs) != 1 || probs[0].Path != "/implementation/url" || !strings.Contains(probs[0].Message, "loopback") {
		t.Errorf("CheckTool of a loopback URL: %+v", probs)
	}
	for _, u := range []string{srv.URL, "http://localhost:" + port + "/", "http://[::ffff:127.0.0.1]:" + port + "/"} {
		wantError(t, r.Call(context.Background(), request(httpTool(u, ""), `{"q":"a"}`)), "loopback")
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the loopback server got %d requests", n)
	}
}

// TestHTTPRedirects: redirects are re-checked against the allow-list and,
// after DNS, against the address policy. The first server is reachable only
// because the allow-list names its exact address and port ("127.0.0.1:P"):
// an explicit address entry exempts that address, nothing else of the
// loopback range.
func TestHTTPRedirects(t *testing.T) {
	t.Parallel()
	target, targetHits := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "target:"+r.Header.Get("Idempotency-Key")+":"+r.Header.Get("X-Api-Key"))
	})
	_, targetPort, _ := net.SplitHostPort(target.Listener.Addr().String())
	var self string
	front, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/loop" {
			http.Redirect(w, r, self+"/loop", http.StatusTemporaryRedirect)
			return
		}
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusTemporaryRedirect)
	})
	self = front.URL
	frontHost := front.Listener.Addr().String()
	via := func(to string) string { return front.URL + "/?to=" + url.QueryEscape(to) }

	t.Run("to a loopback address not on the list", func(t *testing.T) {
		t.Parallel()
		r := newRunner(t, tool.Config{HTTPAllowHosts: []string{frontHost}})
		if probs := r.CheckTool(httpTool(front.URL, "")); len(probs) != 0 {
			t.Fatalf("the allowed server is refused: %+v", probs)
		}
		wantError(t, r.Call(context.Background(), request(httpTool(via(target.URL), ""), `{"q":"a"}`)),
			"redirect to "+target.URL, "not in this server's allow-list")
	})
	t.Run("to an allowed name that resolves to loopback", func(t *testing.T) {
		t.Parallel()
		// The name passes the allow-list; the address it resolves to is
		// refused by the dialer, as DNS rebinding would be.
		r := newRunner(t, tool.Config{HTTPAllowHosts: []string{frontHost, "localhost"}})
		wantError(t, r.Call(context.Background(), request(httpTool(via("http://localhost:"+targetPort+"/"), ""), `{"q":"a"}`)),
			"refused to connect", "loopback")
	})
	t.Run("too many", func(t *testing.T) {
		t.Parallel()
		r := newRunner(t, tool.Config{HTTPAllowHosts: []string{frontHost}})
		wantError(t, r.Call(context.Background(), request(httpTool(front.URL+"/loop", ""), `{"q":"a"}`)), "stopped after 5 redirects")
	})
	t.Run("to another scheme", func(t *testing.T) {
		t.Parallel()
		r := newRunner(t, tool.Config{AllowPrivate: true})
		wantError(t, r.Call(context.Background(), request(httpTool(via("file:///etc/passwd"), ""), `{"q":"a"}`)), "refused")
	})
	if n := targetHits.Load(); n != 0 {
		t.Errorf("the refused target got %d requests", n)
	}
}

// TestHTTPRedirectAllowed: a redirect the policy allows is followed; the
// spec's headers stay with the original host, the Idempotency-Key goes on.
func TestHTTPRedirectAllowed(t *testing.T) {
	t.Parallel()
	target, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "target:"+r.Header.Get("Idempotency-Key")+":"+r.Header.Get("X-Api-Key"))
	})
	_, targetPort, _ := net.SplitHostPort(target.Listener.Addr().String())
	front, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		// 127.0.0.1 and localhost are different hosts to the client.
		http.Redirect(w, r, "http://localhost:"+targetPort+"/", http.StatusTemporaryRedirect)
	})
	r := newRunner(t, tool.Config{AllowPrivate: true})
	res := r.Call(context.Background(), request(httpTool(front.URL, `"headers":{"X-Api-Key":"secret"}`), `{"q":"a"}`))
	if res.IsError || res.Content != "target:chat-1/call_1:" {
		t.Errorf("result = %+v, want the target's answer without the spec's header", res)
	}
}

// TestHTTPAllowListAtCallTime: a spec accepted under an older
// configuration cannot reach a host the current allow-list leaves out.
func TestHTTPAllowListAtCallTime(t *testing.T) {
	t.Parallel()
	srv, hits := countingServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	r := newRunner(t, tool.Config{AllowPrivate: true, HTTPAllowHosts: []string{"tools.example.com"}})
	wantError(t, r.Call(context.Background(), request(httpTool(srv.URL, ""), `{"q":"a"}`)), "misconfigured", "allow-list")
	if n := hits.Load(); n != 0 {
		t.Errorf("the server got %d requests", n)
	}
	// With the server on the list (and AllowPrivate for its address) the
	// same call goes through.
	r2 := newRunner(t, tool.Config{AllowPrivate: true, HTTPAllowHosts: []string{"127.0.0.1"}})
	if res := r2.Call(context.Background(), request(httpTool(srv.URL, ""), `{"q":"a"}`)); res.IsError {
		t.Errorf("allowed call failed: %+v", res)
	}
}

func TestHTTPConnectionRefused(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL
	srv.Close()
	r := newRunner(t, tool.Config{AllowPrivate: true})
	wantError(t, r.Call(context.Background(), request(httpTool(u, ""), `{"q":"a"}`)), "Error: request to "+u, "failed")
}
