package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// ":port" listens on every interface; without API keys that must be
// refused like 0.0.0.0.
func TestAnyInterfaceWithoutKeysIsRefused(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{":0", "0.0.0.0:0", "[::]:0"} {
		cmd := exec.Command(binPath)
		cmd.Env = []string{"AGENTD_ADDR=" + addr, "AGENTD_DATA_DIR=" + t.TempDir(), "AGENTD_SANDBOX=none"}
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("AGENTD_ADDR=%s without keys: agentd started", addr)
			continue
		}
		if !strings.Contains(string(out), "not a loopback address") {
			t.Errorf("AGENTD_ADDR=%s: %v, output %s", addr, err, out)
		}
	}
}

// A web page must not be able to drive a local agentd: not with a simple
// cross-origin POST, not by rebinding its own name to 127.0.0.1.
func TestBrowserCannotDriveAgentd(t *testing.T) {
	t.Parallel()
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none")
	spec := slowSpec(1, 0)

	code, _, body := p.do("POST", "/v1/chats", spec, "Content-Type", "text/plain")
	if code != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain POST: %d %s, want 415", code, body)
	}
	conforms(t, "Problem", body)
	code, _, body = p.do("POST", "/v1/chats", spec, "Origin", "https://evil.example")
	if code != http.StatusForbidden {
		t.Errorf("POST with a foreign Origin: %d %s, want 403", code, body)
	}
	conforms(t, "Problem", body)
	code, _, body = p.do("GET", "/v1/chats", nil, "Sec-Fetch-Site", "cross-site")
	if code != http.StatusForbidden {
		t.Errorf("cross-site GET: %d %s, want 403", code, body)
	}
	// DNS rebinding: the browser connects to 127.0.0.1 but names the
	// attacker's host.
	port := p.base[strings.LastIndex(p.base, ":")+1:]
	for _, host := range []string{"evil.example:" + port, "rebind.attacker.test"} {
		code, body = withHost(t, p, host)
		if code != http.StatusMisdirectedRequest && code != http.StatusForbidden {
			t.Errorf("Host %s: %d %s, want 421", host, code, body)
		}
	}
	for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port} {
		if code, body = withHost(t, p, host); code != http.StatusOK {
			t.Errorf("Host %s: %d %s, want 200", host, code, body)
		}
	}
	// Nothing was created by any of it.
	_, _, body = p.do("GET", "/v1/chats", nil)
	if strings.Contains(string(body), `"id"`) {
		t.Errorf("a refused request created a chat: %s", body)
	}
}

// With AGENTD_CORS_ORIGINS a browser app on that origin uses the API on
// purpose: preflight, the request itself, and an EventSource.
func TestCORSForAllowedOrigins(t *testing.T) {
	t.Parallel()
	const app = "https://app.example.com"
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none", "AGENTD_CORS_ORIGINS="+app)
	code, h, body := p.do("OPTIONS", "/v1/chats", nil, "Origin", app,
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type,idempotency-key")
	if code != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != app ||
		!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
		!strings.Contains(strings.ToLower(h.Get("Access-Control-Allow-Headers")), "idempotency-key") {
		t.Fatalf("preflight: %d %v %s", code, h, body)
	}
	code, h, body = p.do("POST", "/v1/chats", slowSpec(1, 0), "Origin", app)
	if code != http.StatusCreated || h.Get("Access-Control-Allow-Origin") != app ||
		!strings.Contains(h.Get("Access-Control-Expose-Headers"), "Location") {
		t.Fatalf("create from %s: %d %v %s", app, code, h, body)
	}
	var c chatView
	mustUnmarshal(t, body, &c)
	p.waitTerminal(c.ID, 30*time.Second)
	// What an EventSource sends on reconnecting.
	code, h, body = p.do("GET", "/v1/chats/"+c.ID+"/events", nil, "Origin", app, "Accept", "text/event-stream",
		"Last-Event-ID", "1", "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Mode", "cors")
	if code != http.StatusOK || h.Get("Access-Control-Allow-Origin") != app ||
		!strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") || !strings.Contains(string(body), "event: chat.completed") {
		t.Fatalf("EventSource from %s: %d %v %s", app, code, h, body)
	}
	if strings.Contains(string(body), "id: 1\n") {
		t.Errorf("Last-Event-ID 1 was not honoured: %s", body)
	}
	// Another origin still gets nothing.
	if code, _, _ := p.do("OPTIONS", "/v1/chats", nil, "Origin", "https://evil.example", "Access-Control-Request-Method", "POST"); code != http.StatusForbidden {
		t.Errorf("preflight from another origin: %d, want 403", code)
	}
}

// A body trickled a byte at a time and an event stream its client never
// reads are both cut off by the deadlines.
func TestSlowClientsAreCutOff(t *testing.T) {
	t.Parallel()
	t.Run("trickled body", func(t *testing.T) {
		p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none", "AGENTD_READ_TIMEOUT=4s")
		addr := strings.TrimPrefix(p.base, "http://")
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /v1/chats HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", addr)
		start := time.Now()
		go func() {
			for range 60 {
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
				time.Sleep(500 * time.Millisecond)
			}
		}()
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, err = io.ReadAll(conn)
		took := time.Since(start)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("the server still held the connection after %s", took)
		}
		t.Logf("connection ended after %s (%v)", took, err)
		if took > 10*time.Second {
			t.Errorf("the trickled request held its connection for %s", took)
		}
	})

	t.Run("never-reading event stream", func(t *testing.T) {
		// Deadlines long enough for the create of a 6 MB spec on a busy
		// machine under the race detector.
		p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none",
			"AGENTD_READ_TIMEOUT=60s", "AGENTD_WRITE_TIMEOUT=40s", "AGENTD_MAX_BODY_BYTES=33554432")
		addr := strings.TrimPrefix(p.base, "http://")
		// A chat of about 6 MB of messages, streamed to a client that
		// reads nothing with a small receive buffer.
		big := strings.Repeat("x", 150<<10)
		var a, b []string
		for range 20 {
			a = append(a, fmt.Sprintf(`{"content": %q}`, big))
			b = append(b, fmt.Sprintf(`{"content": %q}`, big))
		}
		spec := fmt.Appendf(nil, `{"task": "talk", "max_round": 40,
			"agents": [{"name": "a", "type": "assistant", "model": "ma"}, {"name": "b", "type": "assistant", "model": "mb"}],
			"models": {"ma": {"provider": "replay", "responses": [%s]}, "mb": {"provider": "replay", "responses": [%s]}}}`,
			strings.Join(a, ","), strings.Join(b, ","))
		c := p.create(spec)
		d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
			return rc.Control(func(fd uintptr) {
				_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
			})
		}}
		conn, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "GET /v1/chats/%s/events HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", c.ID, addr)
		p.waitTerminal(c.ID, 4*time.Minute)
		// The server's writes block; its 40 s write deadline must end the
		// stream. Wait past it, then read what is left.
		time.Sleep(45 * time.Second)
		_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
		got, err := io.ReadAll(bufio.NewReader(conn))
		t.Logf("read %d bytes after the stall, then %v", len(got), err)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("the stream stayed open")
		}
		if bytes.Contains(got, []byte("event: chat.completed")) {
			t.Errorf("the never-reading client got the whole stream: it was not cut off")
		}
	})
}

// The caps on streams and the rate limit answer 429 (or 503 for the
// server-wide cap) with Retry-After, while /healthz keeps answering
// through 2,000 attempted streams.
func TestStreamCapsAndRateLimits(t *testing.T) {
	t.Parallel()
	const key1, key2 = "key-one-0123456789abcdef", "key-two-0123456789abcdef"
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none",
		"AGENTD_API_KEYS="+key1+":t1,"+key2+":t2",
		"AGENTD_RATE_LIMIT=0", "AGENTD_MAX_STREAMS=30", "AGENTD_MAX_STREAMS_PER_KEY=20")
	chats := map[string]string{}
	for _, k := range []string{key1, key2} {
		c := p.create(slowSpec(60, 1000), "Authorization", "Bearer "+k)
		chats[k] = c.ID
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var healthFail atomic.Int32
	var healthOK atomic.Int32
	healthDone := make(chan struct{})
	go func() {
		defer close(healthDone)
		// Generous: the point is that it answers at all (no descriptors
		// or goroutines left), on a machine also running the race detector.
		cl := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		for ctx.Err() == nil {
			resp, err := cl.Get(p.base + "/healthz")
			if err != nil || resp.StatusCode != 200 {
				healthFail.Add(1)
			} else {
				healthOK.Add(1)
			}
			if resp != nil {
				resp.Body.Close()
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()

	type outcome struct {
		code       int
		retryAfter string
	}
	var mu sync.Mutex
	counts := map[string]map[int]int{key1: {}, key2: {}}
	missingRetry := 0
	var wg sync.WaitGroup
	tr := &http.Transport{MaxIdleConnsPerHost: -1, DisableKeepAlives: true}
	cl := &http.Client{Transport: tr}
	// Key 1 first (up to its own cap), then key 2 (up to the server's).
	attempt := func(k string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "GET", p.base+"/v1/chats/"+chats[k]+"/events", nil)
			req.Header.Set("Authorization", "Bearer "+k)
			resp, err := cl.Do(req)
			if err != nil {
				mu.Lock()
				counts[k][-1]++
				mu.Unlock()
				return
			}
			o := outcome{resp.StatusCode, resp.Header.Get("Retry-After")}
			mu.Lock()
			counts[k][o.code]++
			if o.code != 200 && o.retryAfter == "" {
				missingRetry++
			}
			mu.Unlock()
			if o.code == 200 {
				// Hold the stream open until the test ends.
				_, _ = io.Copy(io.Discard, resp.Body)
			}
			resp.Body.Close()
		}()
	}
	answered := func(want int) {
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			n := 0
			for _, m := range counts {
				for _, v := range m {
					n += v
				}
			}
			mu.Unlock()
			if n >= want {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for range 1000 {
		attempt(key1)
	}
	answered(1000 - 20)
	for range 1000 {
		attempt(key2)
	}
	// Let every attempt be answered (the accepted ones stay open).
	answered(2000 - 30)
	// Health while the streams are open.
	for range 5 {
		resp, err := http.Get(p.base + "/healthz")
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("healthz with streams open: %v", err)
		}
		if resp != nil {
			resp.Body.Close()
		}
	}
	mu.Lock()
	t.Logf("key1: %v, key2: %v; healthz ok %d, failed %d", counts[key1], counts[key2], healthOK.Load(), healthFail.Load())
	refusedPerKey := counts[key1][http.StatusTooManyRequests] + counts[key2][http.StatusTooManyRequests]
	refusedTotal := counts[key1][http.StatusServiceUnavailable] + counts[key2][http.StatusServiceUnavailable]
	missing := missingRetry
	mu.Unlock()
	if refusedPerKey == 0 || refusedTotal == 0 {
		t.Errorf("want both 429 (per key) and 503 (server-wide) refusals; got %d and %d", refusedPerKey, refusedTotal)
	}
	if missing > 0 {
		t.Errorf("%d refusals without Retry-After", missing)
	}
	cancel()
	wg.Wait()
	<-healthDone
	if healthFail.Load() > 0 || healthOK.Load() == 0 {
		t.Errorf("healthz: %d ok, %d failed under 2,000 attempted streams", healthOK.Load(), healthFail.Load())
	}

	// The rate limit, on a server with a small one.
	q := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none", "AGENTD_RATE_LIMIT=2", "AGENTD_RATE_BURST=5")
	limited := 0
	for range 20 {
		code, h, body := q.do("GET", "/v1/chats", nil)
		if code == http.StatusTooManyRequests {
			limited++
			if h.Get("Retry-After") == "" {
				t.Errorf("429 without Retry-After")
			}
			conforms(t, "Problem", body)
		}
	}
	if limited == 0 {
		t.Errorf("20 requests at once with a rate of 2/s and bursts of 5: none limited")
	}
	if code, _, _ := q.do("GET", "/healthz", nil); code != 200 {
		t.Errorf("healthz while rate limited: %d", code)
	}
}

// withHost GETs /v1/chats from p with the given Host header.
func withHost(t *testing.T, p *proc, host string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", p.base+"/v1/chats", nil)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
