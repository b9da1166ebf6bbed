// Package egress is the only way out of a sandbox that may use the network
// (docs/tools.md): an HTTP proxy (plain requests and CONNECT) that agentd runs
// for each sandboxed program that asks for hosts, on a listener the sandbox
// package makes reachable from inside the sandbox's own network namespace
// and nowhere else.
//
// Every connection is checked twice before it is made: its host and port
// against both the chat's list (the spec's sandbox.network.allow) and the
// operator's (AGENTD_SANDBOX_ALLOW_HOSTS), and every address the name
// resolves to against the address guard that tools use (internal/netguard):
// no loopback, private, link-local or metadata address, whatever DNS says,
// unless the operator's list names that address. The proxy resolves names
// itself, once, and dials the very address it checked, so DNS rebinding
// gains nothing. Redirects are the client's business: each new request is
// checked like the first.
//
// Bytes are counted per chat, in both directions, and capped; connections
// per chat are bounded; a client must send its request head within a
// deadline (slow-loris) and an idle connection is cut.
package egress

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentd/agentd/internal/netguard"
)

// Defaults for zero Config fields.
const (
	DefaultMaxBytesPerChat = 1 << 30 // 1 GiB
	DefaultMaxConnsPerChat = 32
	DefaultHeaderTimeout   = 10 * time.Second
	DefaultIdleTimeout     = 60 * time.Second
	DefaultDialTimeout     = 10 * time.Second
)

// maxHeaderBytes bounds a request head from a sandbox.
const maxHeaderBytes = 64 << 10

// webPorts are the ports an allow-list entry without a port permits: a
// sandbox that may reach "pypi.org" reaches its web server, not its SSH.
var webPorts = []uint16{80, 443}

// Config configures a Proxy. cmd/agentd fills it in; the package reads no
// environment.
type Config struct {
	// AllowHosts is the operator's list (AGENTD_SANDBOX_ALLOW_HOSTS): what a
	// spec's sandbox.network.allow may name. Entries are those of
	// netguard.ParseAllowList; one without a port means ports 80 and 443.
	// Entries that name addresses (IP, IP:port, CIDR) also let connections
	// reach those addresses when they are loopback or private. Empty: no
	// sandbox gets a network.
	AllowHosts []string
	// MaxBytesPerChat caps the bytes one chat's sandboxes exchange with
	// remote hosts, both directions together, for as long as this process
	// runs the chat (default 1 GiB). Past it, connections are cut and new
	// ones refused.
	MaxBytesPerChat int64
	// MaxConnsPerChat bounds one chat's open connections (default 32).
	MaxConnsPerChat int
	// HeaderTimeout is how long a client may take to send a request head
	// (default 10s): the bound on slow-loris clients.
	HeaderTimeout time.Duration
	// IdleTimeout cuts a connection on which nothing moved for that long,
	// in either direction (default 60s).
	IdleTimeout time.Duration
	// DialTimeout bounds resolving and connecting (default 10s).
	DialTimeout time.Duration
	// LookupNetIP resolves names; nil: the system resolver. Tests use it to
	// stand in for DNS servers that answer with hostile addresses.
	LookupNetIP func(ctx context.Context, network, host string) ([]netip.Addr, error)
	Logger      *slog.Logger
	// Registerer receives the egress metrics; nil registers none.
	Registerer prometheus.Registerer
}

// Validate reports every problem with c.
func (c Config) Validate() error {
	var errs []error
	if _, err := netguard.ParseAllowList(c.AllowHosts); err != nil {
		errs = append(errs, fmt.Errorf("sandbox allow hosts: %w", err))
	}
	if c.MaxBytesPerChat < 0 {
		errs = append(errs, fmt.Errorf("sandbox egress byte cap %d: must not be negative", c.MaxBytesPerChat))
	}
	if c.MaxConnsPerChat < 0 {
		errs = append(errs, fmt.Errorf("sandbox egress connection limit %d: must not be negative", c.MaxConnsPerChat))
	}
	for name, d := range map[string]time.Duration{"header timeout": c.HeaderTimeout, "idle timeout": c.IdleTimeout, "dial timeout": c.DialTimeout} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("sandbox egress %s %s: must not be negative", name, d))
		}
	}
	return errors.Join(errs...)
}

// Proxy is the egress proxy of every sandbox of this process. It is safe for
// concurrent use.
type Proxy struct {
	cfg      Config
	operator *netguard.AllowList
	policy   netguard.Policy
	log      *slog.Logger
	met      *metrics

	mu       sync.Mutex
	chats    map[string]*chatState
	sessions map[*session]struct{}
	stopped  bool
}

// chatState is what the proxy keeps per chat: the byte budget and the open
// connections, shared by all of the chat's concurrent programs.
type chatState struct {
	bytes atomic.Int64
	conns atomic.Int64
}

// New validates cfg and returns a Proxy.
func New(cfg Config) (*Proxy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxBytesPerChat == 0 {
		cfg.MaxBytesPerChat = DefaultMaxBytesPerChat
	}
	cfg.MaxConnsPerChat = cmp.Or(cfg.MaxConnsPerChat, DefaultMaxConnsPerChat)
	cfg.HeaderTimeout = cmp.Or(cfg.HeaderTimeout, DefaultHeaderTimeout)
	cfg.IdleTimeout = cmp.Or(cfg.IdleTimeout, DefaultIdleTimeout)
	cfg.DialTimeout = cmp.Or(cfg.DialTimeout, DefaultDialTimeout)
	if cfg.LookupNetIP == nil {
		cfg.LookupNetIP = net.DefaultResolver.LookupNetIP
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	met, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	op, _ := netguard.ParseAllowList(cfg.AllowHosts) // checked by Validate
	op.RestrictBarePorts(webPorts...)
	return &Proxy{
		cfg: cfg, operator: op, policy: netguard.Policy{Allow: op},
		log: cfg.Logger.With("component", "egress"), met: met,
		chats: map[string]*chatState{}, sessions: map[*session]struct{}{},
	}, nil
}

// CheckSandboxHost implements spec.SandboxHostChecker: an entry of a spec's
// sandbox.network.allow must parse and be covered by the operator's list.
func (p *Proxy) CheckSandboxHost(entry string) string {
	if err := netguard.ValidEntry(entry); err != nil {
		return fmt.Sprintf("%q: %v", entry, err)
	}
	narrow := (&netguard.AllowList{}).RestrictBarePorts(webPorts...)
	if !p.operator.Covers(entry, narrow) {
		return fmt.Sprintf("host %q is not permitted by this server (AGENTD_SANDBOX_ALLOW_HOSTS); an entry without a port means ports 80 and 443", entry)
	}
	return ""
}

// Serve serves the proxy for one program of chatID on l, with the chat's
// allow-list, until the returned Closer is called; closing it also cuts the
// connections it accepted. l is closed then too.
func (p *Proxy) Serve(chatID string, allow []string, l net.Listener) (io.Closer, error) {
	list, err := netguard.ParseAllowList(allow)
	if err != nil {
		return nil, err
	}
	list.RestrictBarePorts(webPorts...)
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return nil, errors.New("egress proxy stopped")
	}
	st := p.chats[chatID]
	if st == nil {
		st = &chatState{}
		p.chats[chatID] = st
	}
	s := &session{p: p, chatID: chatID, allow: list, st: st, l: l, conns: map[net.Conn]struct{}{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	p.sessions[s] = struct{}{}
	p.mu.Unlock()
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Forget drops what the proxy keeps about a chat (its byte count): the chat
// ended and its sandbox is gone.
func (p *Proxy) Forget(chatID string) {
	p.mu.Lock()
	delete(p.chats, chatID)
	p.mu.Unlock()
}

// Stop closes every listener and connection. Safe to call twice.
func (p *Proxy) Stop(context.Context) error {
	p.mu.Lock()
	p.stopped = true
	ss := make([]*session, 0, len(p.sessions))
	for s := range p.sessions {
		ss = append(ss, s)
	}
	p.mu.Unlock()
	for _, s := range ss {
		s.Close()
	}
	return nil
}

// session serves one listener: one sandboxed program.
type session struct {
	p      *Proxy
	chatID string
	allow  *netguard.AllowList
	st     *chatState
	l      net.Listener
	wg     sync.WaitGroup
	// clients counts the session's client connections.
	clients atomic.Int64
	// ctx ends with the session: it cuts resolving and dialing short.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	once   sync.Once
}

// Close stops accepting, cuts the session's connections and waits for them.
func (s *session) Close() error {
	s.once.Do(func() {
		s.cancel()
		s.mu.Lock()
		s.closed = true
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.l.Close()
		s.wg.Wait()
		s.p.mu.Lock()
		delete(s.p.sessions, s)
		s.p.mu.Unlock()
	})
	return nil
}

// track adds (or, with add false, removes) a connection to cut on Close.
func (s *session) track(c net.Conn, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		delete(s.conns, c)
		return true
	}
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *session) accept() {
	defer s.wg.Done()
	for {
		c, err := s.l.Accept()
		if err != nil {
			return
		}
		if n := s.clients.Add(1); n > int64(4*s.p.cfg.MaxConnsPerChat) {
			// Connections that never send a request hold nothing upstream,
			// but each holds a goroutine until its header timeout.
			s.clients.Add(-1)
			s.p.met.conns.WithLabelValues("refused").Inc()
			s.p.met.refused.WithLabelValues("conn_limit").Inc()
			c.Close()
			continue
		}
		if !s.track(c, true) {
			s.clients.Add(-1)
			c.Close()
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.clients.Add(-1)
			defer s.track(c, false)
			defer c.Close()
			s.handle(c)
		}()
	}
}

// refusal is a request the proxy does not carry out.
type refusal struct {
	status int
	reason string // metric label
	msg    string
}

// handle serves one client connection: one request, or one tunnel. A plain
// request is sent upstream with "Connection: close", so that each request
// is checked on its own; clients reconnect.
func (s *session) handle(c net.Conn) {
	start := time.Now()
	lr := &io.LimitedReader{R: c, N: maxHeaderBytes}
	br := bufio.NewReader(lr)
	_ = c.SetReadDeadline(start.Add(s.p.cfg.HeaderTimeout))
	req, err := http.ReadRequest(br)
	if err != nil {
		switch {
		// textproto reports a line cut by the deadline as malformed, so
		// the clock decides.
		case isTimeout(err) || !time.Now().Before(start.Add(s.p.cfg.HeaderTimeout)):
			s.refuse(c, "-", refusal{http.StatusRequestTimeout, "header_timeout",
				fmt.Sprintf("request head not complete within %s", s.p.cfg.HeaderTimeout)})
		case lr.N <= 0:
			s.refuse(c, "-", refusal{http.StatusRequestHeaderFieldsTooLarge, "bad_request", "request head too large"})
		case errors.Is(err, io.EOF):
		default:
			s.refuse(c, "-", refusal{http.StatusBadRequest, "bad_request", "malformed request: " + err.Error()})
		}
		return
	}
	lr.N = 1 << 62 // the head is read: the body and a tunnel are not limited here
	_ = c.SetReadDeadline(time.Time{})

	var host string
	var port uint16
	var ok bool
	if req.Method == http.MethodConnect {
		host, port, ok = splitTarget(req.Host, 0)
	} else if req.URL.Scheme == "http" && req.URL.Host != "" {
		host, port, ok = splitTarget(req.URL.Host, 80)
	}
	target := net.JoinHostPort(host, strconv.Itoa(int(port)))
	if !ok {
		what := req.Host
		if req.Method != http.MethodConnect {
			what = req.URL.String()
		}
		s.refuse(c, what, refusal{http.StatusBadRequest, "bad_request",
			"want CONNECT host:port, or an absolute http:// URL (https goes through CONNECT)"})
		return
	}
	up, ref := s.dial(s.ctx, host, port)
	if ref != nil {
		s.refuse(c, target, *ref)
		return
	}
	defer up.Close()
	defer s.p.met.active.Dec()
	s.p.met.active.Inc()
	if !s.track(up, true) {
		return
	}
	defer s.track(up, false)
	s.p.met.conns.WithLabelValues("allowed").Inc()
	mc := &meteredConn{Conn: up, s: s}
	cc := &idleConn{Conn: c, idle: s.p.cfg.IdleTimeout}
	if req.Method == http.MethodConnect {
		if _, err := io.WriteString(cc, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
		// Bytes the client sent after the head (a TLS hello) are already
		// in br.
		err = tunnel(mc, io.MultiReader(io.LimitReader(br, int64(br.Buffered())), cc), cc)
	} else {
		err = forward(req, mc, cc)
	}
	s.p.log.Info("egress connection", "chat_id", s.chatID, "target", target, "addr", up.RemoteAddr().String(),
		"method", req.Method, "bytes_out", mc.out.Load(), "bytes_in", mc.in.Load(),
		"duration", time.Since(start).Round(time.Millisecond), "err", errString(err))
	if errors.Is(err, errCap) {
		s.p.met.refused.WithLabelValues("byte_cap").Inc()
		s.p.log.Warn("egress byte cap reached, connection cut", "chat_id", s.chatID, "target", target, "cap", s.p.cfg.MaxBytesPerChat)
	} else if isTimeout(err) {
		s.p.met.refused.WithLabelValues("idle_timeout").Inc()
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// splitTarget parses "host:port" (or "host" with defPort, when not 0).
// IPv6 literals come with brackets; the host returned has none.
func splitTarget(hp string, defPort uint16) (string, uint16, bool) {
	host, ps, err := net.SplitHostPort(hp)
	if err != nil {
		if defPort == 0 || strings.Contains(strings.Trim(hp, "[]"), ":") && !strings.HasPrefix(hp, "[") {
			return "", 0, false
		}
		host, ps = strings.Trim(hp, "[]"), strconv.Itoa(int(defPort))
	}
	n, err := strconv.ParseUint(ps, 10, 16)
	if err != nil || n == 0 || host == "" {
		return "", 0, false
	}
	return strings.ToLower(host), uint16(n), true
}

// dial checks host:port against both lists, resolves it and connects to
// the first address the guard lets through.
func (s *session) dial(ctx context.Context, host string, port uint16) (net.Conn, *refusal) {
	p := s.p
	target := net.JoinHostPort(host, strconv.Itoa(int(port)))
	switch {
	case !s.allow.AllowsHost(host, port):
		return nil, &refusal{http.StatusForbidden, "host_not_allowed",
			fmt.Sprintf("%s is not in this chat's sandbox.network.allow (a host without a port there means ports 80 and 443)", target)}
	case !p.operator.AllowsHost(host, port):
		return nil, &refusal{http.StatusForbidden, "host_not_allowed", fmt.Sprintf("%s is not permitted by this server", target)}
	}
	if n := s.st.conns.Add(1); n > int64(p.cfg.MaxConnsPerChat) {
		s.st.conns.Add(-1)
		return nil, &refusal{http.StatusTooManyRequests, "conn_limit",
			fmt.Sprintf("the chat has %d connections open, the most allowed", p.cfg.MaxConnsPerChat)}
	}
	release := true
	defer func() {
		if release {
			s.st.conns.Add(-1)
		}
	}()
	if s.st.bytes.Load() >= p.cfg.MaxBytesPerChat {
		return nil, &refusal{http.StatusForbidden, "byte_cap", fmt.Sprintf("the chat has used its %d bytes of network traffic", p.cfg.MaxBytesPerChat)}
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		addrs, err = p.cfg.LookupNetIP(ctx, "ip", host)
		if err != nil || len(addrs) == 0 {
			return nil, &refusal{http.StatusBadGateway, "dns", fmt.Sprintf("cannot resolve %s: %v", host, err)}
		}
	}
	d := net.Dialer{Control: p.policy.Control}
	var firstErr error
	var blocked *netguard.AddressError
	for _, a := range addrs {
		ap := netip.AddrPortFrom(a.WithZone("").Unmap(), port)
		if err := p.policy.Check(ap); err != nil {
			firstErr = cmp.Or(firstErr, err)
			continue
		}
		c, err := d.DialContext(ctx, "tcp", ap.String())
		if err == nil {
			release = false
			return &releaseConn{Conn: c, st: s.st}, nil
		}
		firstErr = cmp.Or(firstErr, err)
	}
	if errors.As(firstErr, &blocked) {
		return nil, &refusal{http.StatusForbidden, "address",
			fmt.Sprintf("%s: %v", host, blocked)}
	}
	return nil, &refusal{http.StatusBadGateway, "connect", fmt.Sprintf("cannot connect to %s: %v", target, firstErr)}
}

// releaseConn gives back the chat's connection slot once, on Close.
type releaseConn struct {
	net.Conn
	st   *chatState
	once sync.Once
}

func (r *releaseConn) Close() error {
	r.once.Do(func() { r.st.conns.Add(-1) })
	return r.Conn.Close()
}

// CloseWrite half-closes the TCP connection: a client that is done sending
// may still be reading the answer.
func (r *releaseConn) CloseWrite() error {
	if cw, ok := r.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return r.Close()
}

// refuse answers a request the proxy does not carry out, logs and counts it.
// The message is in the status line too, where clients (pip, requests,
// curl) show it: "Tunnel connection failed: 403 agentd egress: …".
func (s *session) refuse(c net.Conn, target string, r refusal) {
	s.p.met.conns.WithLabelValues(map[bool]string{true: "refused", false: "failed"}[r.status < 500]).Inc()
	s.p.met.refused.WithLabelValues(r.reason).Inc()
	s.p.log.Warn("egress refused", "chat_id", s.chatID, "target", target, "reason", r.reason, "detail", r.msg)
	msg := strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, r.msg)
	body := "agentd egress proxy refused the request: " + msg + "\n"
	_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(c, "HTTP/1.1 %d agentd egress: %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		r.status, msg, len(body), body)
}

// errCap is the chat's byte budget running out.
var errCap = errors.New("the chat's egress byte cap is reached")

// meteredConn is the upstream side: every byte counts against the chat's
// budget and in the metrics, and nothing may sit idle for long.
type meteredConn struct {
	net.Conn
	s       *session
	in, out atomic.Int64
}

func (m *meteredConn) count(n int, dir string, c *atomic.Int64) error {
	if n <= 0 {
		return nil
	}
	c.Add(int64(n))
	m.s.p.met.bytes.WithLabelValues(dir).Add(float64(n))
	if m.s.st.bytes.Add(int64(n)) > m.s.p.cfg.MaxBytesPerChat {
		return errCap
	}
	return nil
}

func (m *meteredConn) Read(b []byte) (int, error) {
	_ = m.Conn.SetReadDeadline(time.Now().Add(m.s.p.cfg.IdleTimeout))
	n, err := m.Conn.Read(b)
	if cerr := m.count(n, "in", &m.in); cerr != nil {
		return 0, cerr
	}
	return n, err
}

func (m *meteredConn) Write(b []byte) (int, error) {
	if cerr := m.count(len(b), "out", &m.out); cerr != nil {
		return 0, cerr
	}
	_ = m.Conn.SetWriteDeadline(time.Now().Add(m.s.p.cfg.IdleTimeout))
	return m.Conn.Write(b)
}

// idleConn is the client side: nothing may sit idle for long.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c *idleConn) Read(b []byte) (int, error) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	return c.Conn.Read(b)
}

func (c *idleConn) Write(b []byte) (int, error) {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.idle))
	return c.Conn.Write(b)
}

// closeWrite half-closes c when it can (TCP, unix), else closes it.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// tunnel copies both ways until both are done; an error either way (the
// byte cap, a timeout) ends both.
func tunnel(up *meteredConn, fromClient io.Reader, client *idleConn) error {
	errc := make(chan error, 2)
	go func() {
		_, err := io.Copy(up, fromClient)
		if err == nil {
			closeWrite(up.Conn)
		}
		errc <- err
	}()
	go func() {
		_, err := io.Copy(client, up)
		if err == nil {
			closeWrite(client.Conn)
		}
		errc <- err
	}()
	var first error
	for range 2 {
		if err := <-errc; err != nil && first == nil {
			first = err
			// Unblock the other direction.
			_ = up.Conn.Close()
			_ = client.Conn.Close()
		}
	}
	return first
}

// hopHeaders are the hop-by-hop headers a proxy does not forward (RFC 9110
// §7.6.1), plus the proxy's own.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authorization",
	"Proxy-Authenticate", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// forward sends a plain request upstream in origin form and copies the
// response back as it comes.
func forward(req *http.Request, up *meteredConn, client *idleConn) error {
	for _, f := range req.Header.Values("Connection") {
		for _, h := range strings.Split(f, ",") {
			req.Header.Del(strings.TrimSpace(h))
		}
	}
	for _, h := range hopHeaders {
		req.Header.Del(h)
	}
	req.Close = true // "Connection: close": one request per connection
	req.Host = req.URL.Host
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""} // or req.Write would add Go's
	}
	errc := make(chan error, 1)
	go func() { errc <- req.Write(up) }()
	_, err := io.Copy(client, up)
	// The response is done (or failed): stop sending the request body too,
	// also when the client is slow to send it.
	_ = up.Conn.Close()
	_ = client.Conn.SetReadDeadline(time.Now())
	werr := <-errc
	if err == nil && isTimeout(werr) {
		werr = nil // the deadline set just above
	}
	return cmp.Or(err, werr)
}
