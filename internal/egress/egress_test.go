package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hostileDNS stands in for DNS servers that answer with addresses no
// sandbox may reach; names it does not know do not resolve.
var hostileDNS = map[string][]netip.Addr{
	"loop.test":   {netip.MustParseAddr("127.0.0.1")},
	"meta.test":   {netip.MustParseAddr("169.254.169.254")},
	"ten.test":    {netip.MustParseAddr("10.1.2.3")},
	"mapped.test": {netip.MustParseAddr("::ffff:127.0.0.1")},
	"six.test":    {netip.MustParseAddr("::1")},
	"nat64.test":  {netip.MustParseAddr("64:ff9b::7f00:1")},
}

func lookup(_ context.Context, _, host string) ([]netip.Addr, error) {
	if host == "localhost" {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	if a, ok := hostileDNS[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// counter is a server that counts the connections it gets: the stand-in
// for what must never be reached (agentd's own port, a metadata service).
type counter struct {
	ln       net.Listener
	accepted atomic.Int32
	done     chan struct{}
}

func newCounter(t *testing.T) *counter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &counter{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.accepted.Add(1)
			conn.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-c.done })
	return c
}

func (c *counter) port() int { return c.ln.Addr().(*net.TCPAddr).Port }

// fixture is a proxy serving one chat, an allowed upstream on loopback
// (exempted by the operator's list, as an operator would for an internal
// package index) and a secret server that nothing may reach.
type fixture struct {
	p        *Proxy
	reg      *prometheus.Registry
	addr     string // the proxy's listener
	up       *httptest.Server
	upPort   int
	upHits   atomic.Int32
	secret   *counter
	closeSrv io.Closer
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	f := &fixture{reg: prometheus.NewRegistry(), secret: newCounter(t)}
	f.up = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.upHits.Add(1)
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
		case "/big":
			w.Write(make([]byte, 1<<20))
		case "/echo":
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "host=%s body=%s", r.Host, b)
		case "/stall":
			<-r.Context().Done()
		default:
			io.WriteString(w, "hello from upstream")
		}
	}))
	t.Cleanup(f.up.Close)
	f.upPort = f.up.Listener.Addr().(*net.TCPAddr).Port
	up, sec := strconv.Itoa(f.upPort), strconv.Itoa(f.secret.port())
	cfg.AllowHosts = append([]string{"localhost:" + up, "127.0.0.1:" + up, "*.test:" + sec}, cfg.AllowHosts...)
	cfg.LookupNetIP = lookup
	cfg.Registerer = f.reg
	cfg.Logger = slog.New(slog.DiscardHandler)
	var err error
	if f.p, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	f.closeSrv, err = f.p.Serve("chat1", []string{"localhost:" + up, "*.test:" + sec}, ln)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.closeSrv.Close(); f.p.Stop(context.Background()) })
	return f
}

func (f *fixture) client() *http.Client {
	pu, _ := url.Parse("http://" + f.addr)
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu), DisableKeepAlives: true}, Timeout: 20 * time.Second}
}

// get fetches u through the proxy and returns the status and body.
func (f *fixture) get(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := f.client().Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// connect sends CONNECT target and returns the status line and the open
// connection.
func (f *fixture) connect(t *testing.T, target string) (string, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	if !strings.HasPrefix(line, "HTTP/1.1 200") {
		return strings.TrimSpace(line), c, br
	}
	if blank, _ := br.ReadString('\n'); blank != "\r\n" {
		t.Fatalf("CONNECT %s: want an empty line after the status, got %q", target, blank)
	}
	return strings.TrimSpace(line), c, br
}

func TestProxyAllows(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	code, body := f.get(t, fmt.Sprintf("http://localhost:%d/x", f.upPort))
	if code != 200 || body != "hello from upstream" {
		t.Fatalf("GET through the proxy = %d %q", code, body)
	}
	// A request body goes through, and Host is the URL's.
	resp, err := f.client().Post(fmt.Sprintf("http://localhost:%d/echo", f.upPort), "text/plain", strings.NewReader("ping"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf("host=localhost:%d body=ping", f.upPort); string(b) != want {
		t.Errorf("POST = %q, want %q", b, want)
	}
	// CONNECT makes a tunnel (what HTTPS uses).
	line, c, br := f.connect(t, fmt.Sprintf("localhost:%d", f.upPort))
	if !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Fatalf("CONNECT = %q", line)
	}
	fmt.Fprintf(c, "GET /x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	if string(b) != "hello from upstream" {
		t.Errorf("through the tunnel: %q", b)
	}
	if got := testutil.ToFloat64(f.p.met.conns.WithLabelValues("allowed")); got != 3 {
		t.Errorf("allowed connections = %v, want 3", got)
	}
	if got := testutil.ToFloat64(f.p.met.bytes.WithLabelValues("in")); got <= 0 {
		t.Errorf("bytes in = %v, want > 0", got)
	}
}

// TestProxyRefuses is the proxy's part of the escape suite: every way to a
// host or address outside both lists is refused, and nothing reaches the
// secret server.
func TestProxyRefuses(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	sec := f.secret.port()
	up := f.upPort
	urls := []struct{ url, want string }{
		// Names that resolve to what no sandbox may reach.
		{fmt.Sprintf("http://loop.test:%d/", sec), "loopback"},
		{fmt.Sprintf("http://meta.test:%d/latest/meta-data/", sec), "link-local"},
		{fmt.Sprintf("http://ten.test:%d/", sec), "private"},
		{fmt.Sprintf("http://mapped.test:%d/", sec), "loopback"},
		{fmt.Sprintf("http://six.test:%d/", sec), "loopback"},
		{fmt.Sprintf("http://nat64.test:%d/", sec), "loopback"},
		{fmt.Sprintf("http://unknown.test:%d/", sec), "cannot resolve"},
		// Other spellings of loopback: not on the chat's list (which names
		// localhost only), even where the operator exempts the address.
		{fmt.Sprintf("http://127.0.0.1:%d/", up), "not in this chat's"},
		{fmt.Sprintf("http://[::1]:%d/", up), "not in this chat's"},
		{fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/", up), "not in this chat's"},
		{fmt.Sprintf("http://[::ffff:7f00:1]:%d/", up), "not in this chat's"},
		{fmt.Sprintf("http://2130706433:%d/", up), "not in this chat's"},
		{fmt.Sprintf("http://0x7f.1:%d/", up), "not in this chat's"},
		{fmt.Sprintf("http://127.0.0.1:%d/", sec), "not in this chat's"},
		// Another port of an allowed host.
		{fmt.Sprintf("http://localhost:%d/", sec), "not in this chat's"},
		{"http://localhost/", "not in this chat's"},
		// A redirect to a host that is not allowed: the client follows it,
		// and the new request is refused like any other.
		{fmt.Sprintf("http://localhost:%d/redirect?to=%s", up, url.QueryEscape(fmt.Sprintf("http://127.0.0.1:%d/", sec))), "not in this chat's"},
		{fmt.Sprintf("http://localhost:%d/redirect?to=%s", up, url.QueryEscape(fmt.Sprintf("http://meta.test:%d/", sec))), "link-local"},
	}
	for _, tt := range urls {
		code, body := f.get(t, tt.url)
		if code < 400 || !strings.Contains(body, tt.want) {
			t.Errorf("GET %s = %d %q, want a refusal saying %q", tt.url, code, body, tt.want)
		}
	}
	// CONNECT to a port the chat may not use, and to a refused address.
	for _, target := range []string{"localhost:22", fmt.Sprintf("localhost:%d", sec), fmt.Sprintf("loop.test:%d", sec),
		fmt.Sprintf("[::ffff:127.0.0.1]:%d", sec), fmt.Sprintf("127.0.0.1:%d", up), fmt.Sprintf("meta.test:%d", sec)} {
		if line, _, _ := f.connect(t, target); !strings.HasPrefix(line, "HTTP/1.1 403") {
			t.Errorf("CONNECT %s = %q, want 403", target, line)
		}
	}
	// https:// in a plain request (no CONNECT) and garbage are bad requests.
	for _, raw := range []string{"GET https://localhost/ HTTP/1.1\r\nHost: localhost\r\n\r\n", "GET /relative HTTP/1.1\r\nHost: localhost\r\n\r\n", "NONSENSE\r\n\r\n"} {
		c, err := net.Dial("tcp", f.addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, raw)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if !strings.HasPrefix(line, "HTTP/1.1 400") {
			t.Errorf("%q = %q, want 400", raw, line)
		}
	}
	if n := f.secret.accepted.Load(); n != 0 {
		t.Errorf("the secret server got %d connections", n)
	}
	if got := testutil.ToFloat64(f.p.met.refused.WithLabelValues("address")); got < 6 {
		t.Errorf("refusals for the address = %v, want at least 6", got)
	}
	if got := testutil.ToFloat64(f.p.met.refused.WithLabelValues("host_not_allowed")); got < 10 {
		t.Errorf("refusals for the host = %v, want at least 10", got)
	}
}

func TestProxyOperatorList(t *testing.T) {
	t.Parallel()
	p, err := New(Config{AllowHosts: []string{"pypi.org", "*.pythonhosted.org:443", "10.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	for entry, ok := range map[string]bool{"pypi.org": true, "pypi.org:443": true, "pypi.org:8080": false,
		"files.pythonhosted.org:443": true, "files.pythonhosted.org": false, "evil.example": false, "10.1.2.3:443": true, "bad host": false} {
		if msg := p.CheckSandboxHost(entry); (msg == "") != ok {
			t.Errorf("CheckSandboxHost(%q) = %q, want permitted %v", entry, msg, ok)
		}
	}
	// A chat's own list may name what the operator does not permit (a spec
	// from before a configuration change): both lists apply.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := p.Serve("c", []string{"evil.example"}, ln)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET http://evil.example/ HTTP/1.1\r\nHost: evil.example\r\n\r\n")
	line, _ := bufio.NewReader(c).ReadString('\n')
	if !strings.HasPrefix(line, "HTTP/1.1 403") || !strings.Contains(line, "not permitted by this server") {
		t.Errorf("a host the operator does not permit: %q", line)
	}
	if err := (Config{AllowHosts: []string{"ok.example", "bad host", "10.0.0.0/99"}}).Validate(); err == nil ||
		!strings.Contains(err.Error(), "bad host") || !strings.Contains(err.Error(), "10.0.0.0/99") {
		t.Errorf("Validate = %v, want both bad entries named", err)
	}
}

func TestProxySlowLoris(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{HeaderTimeout: time.Second})
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET http://localhost:%d/ HTTP/1.1\r\n", f.upPort)
	start := time.Now()
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(c)
		done <- string(b)
	}()
	// One header byte every 100ms: never a complete head.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case got := <-done:
			if !strings.HasPrefix(got, "HTTP/1.1 408") {
				t.Errorf("a slow client got %q, want 408", got)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("cut after %s", took)
			}
			if f.upHits.Load() != 0 {
				t.Error("the upstream was reached")
			}
			return
		case <-tick.C:
			c.Write([]byte("X"))
		}
	}
}

func TestProxyIdleTimeout(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{IdleTimeout: time.Second})
	start := time.Now()
	resp, err := f.client().Get(fmt.Sprintf("http://localhost:%d/stall", f.upPort))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a stalled upstream answered %d", resp.StatusCode)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("cut after %s", took)
	}
	if got := testutil.ToFloat64(f.p.met.refused.WithLabelValues("idle_timeout")); got != 1 {
		t.Errorf("idle timeouts = %v, want 1", got)
	}
}

func TestProxyByteCap(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{MaxBytesPerChat: 64 << 10})
	resp, err := f.client().Get(fmt.Sprintf("http://localhost:%d/big", f.upPort))
	if err == nil {
		n, rerr := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if rerr == nil || n >= 1<<20 {
			t.Errorf("read %d bytes (err %v) past a 64 KiB cap", n, rerr)
		}
	}
	code, body := f.get(t, fmt.Sprintf("http://localhost:%d/x", f.upPort))
	if code != http.StatusForbidden || !strings.Contains(body, "bytes of network traffic") {
		t.Errorf("after the cap: %d %q", code, body)
	}
	// The budget is the chat's, across its runs; another chat has its own,
	// and a chat that was forgotten (it ended) starts afresh.
	get := func(chatID string) int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s, err := f.p.Serve(chatID, []string{fmt.Sprintf("localhost:%d", f.upPort)}, ln)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		pu, _ := url.Parse("http://" + ln.Addr().String())
		resp, err := (&http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu), DisableKeepAlives: true}}).Get(fmt.Sprintf("http://localhost:%d/x", f.upPort))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("chat1"); code != http.StatusForbidden {
		t.Errorf("a new run of the chat: %d, want 403", code)
	}
	if code := get("chat2"); code != 200 {
		t.Errorf("another chat: %d", code)
	}
	f.p.Forget("chat1")
	if code := get("chat1"); code != 200 {
		t.Errorf("after Forget: %d", code)
	}
}

func TestProxyConnLimitAndClose(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{MaxConnsPerChat: 2})
	target := fmt.Sprintf("localhost:%d", f.upPort)
	var tunnels []net.Conn
	for range 2 {
		line, c, _ := f.connect(t, target)
		if !strings.HasPrefix(line, "HTTP/1.1 200") {
			t.Fatalf("CONNECT = %q", line)
		}
		tunnels = append(tunnels, c)
	}
	if line, _, _ := f.connect(t, target); !strings.HasPrefix(line, "HTTP/1.1 429") {
		t.Errorf("a third connection = %q, want 429", line)
	}
	// Closing the session (the run ended) cuts its tunnels.
	f.closeSrv.Close()
	for _, c := range tunnels {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Errorf("a tunnel after Close: %v, want EOF", err)
		}
	}
	if _, err := net.Dial("tcp", f.addr); err == nil {
		t.Error("the listener still accepts after Close")
	}
}

func TestSplitTarget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		def  uint16
		host string
		port uint16
		ok   bool
	}{
		{"example.com:443", 0, "example.com", 443, true},
		{"Example.COM", 80, "example.com", 80, true},
		{"example.com", 0, "", 0, false}, // CONNECT needs a port
		{"[::1]:80", 0, "::1", 80, true},
		{"[::1]", 80, "::1", 80, true},
		{"::1", 80, "", 0, false},
		{"example.com:0", 0, "", 0, false},
		{"example.com:99999", 0, "", 0, false},
		{":80", 0, "", 0, false},
	}
	for _, tt := range tests {
		h, p, ok := splitTarget(tt.in, tt.def)
		if h != tt.host || p != tt.port || ok != tt.ok {
			t.Errorf("splitTarget(%q, %d) = %q, %d, %v; want %q, %d, %v", tt.in, tt.def, h, p, ok, tt.host, tt.port, tt.ok)
		}
	}
}
