package tool

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/netguard"
)

// errRunnerClosed is returned for MCP work after Close.
var errRunnerClosed = errors.New("the tool runner is closed")

// describeMCP lists the server's tools as functions, filtered by the
// implementation's tools list.
func (r *Runner) describeMCP(ctx context.Context, chatID string, impl *implementation) ([]chat.ToolDef, error) {
	timeout := r.timeout(impl)
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, &timeoutError{d: timeout})
	defer cancel()
	tools, err := r.mcp.list(ctx, r.mcpTargetOf(chatID, impl), timeout)
	if err != nil {
		var te *timeoutError
		if errors.As(context.Cause(ctx), &te) {
			err = te
		}
		return nil, fmt.Errorf("list the tools of mcp server %s: %w", impl.URL.Redacted(), mcpErrorText(err))
	}
	var defs []chat.ToolDef
	offered := map[string]bool{}
	for _, t := range tools {
		if impl.Tools != nil && !slices.Contains(impl.Tools, t.Name) {
			continue
		}
		if !namePattern.MatchString(t.Name) {
			// MCP allows names ("fs/read", "a.b") that the OpenAI API
			// refuses in a request; offering one would break every model
			// call of the chat, so it is left out and logged.
			r.log.Warn("mcp tool left out: its name is not a valid function name",
				"chat_id", chatID, "url", impl.URL.Redacted(), "function", t.Name)
			continue
		}
		params, err := json.Marshal(t.InputSchema)
		if err != nil || t.InputSchema == nil {
			params = json.RawMessage(`{"type":"object"}`)
		}
		offered[t.Name] = true
		defs = append(defs, chat.ToolDef{Name: t.Name, Description: cmp.Or(t.Description, t.Title), Parameters: params})
	}
	var missing []string
	for _, name := range impl.Tools {
		if !offered[name] {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("mcp server %s does not offer %s", impl.URL.Redacted(), strings.Join(missing, ", "))
	}
	return defs, nil
}

// callMCP calls one tool of the server.
func (r *Runner) callMCP(ctx context.Context, req *chat.ToolRequest, impl *implementation, args arguments) outcome {
	name := req.Function.Name
	if name == "" || (impl.Tools != nil && !slices.Contains(impl.Tools, name)) {
		return failed(outcomeFailed, fmt.Errorf("function %q not offered", name), "tool %s does not offer a function %q", req.Tool.Name, name)
	}
	res, err := r.mcp.call(ctx, r.mcpTargetOf(req.ChatID, impl), r.timeout(impl),
		&mcp.CallToolParams{Name: name, Arguments: args.raw})
	if err != nil {
		var blocked *netguard.AddressError
		var redirect *redirectError
		var origin *originError
		if errors.As(err, &blocked) || errors.As(err, &redirect) || errors.As(err, &origin) {
			return failed(outcomeRefused, err, "refused to connect to mcp server %s: %v", impl.URL.Redacted(), mcpErrorText(err))
		}
		return failed(outcomeFailed, err, "mcp call of %s failed: %v", name, mcpErrorText(err))
	}
	content := resultText(res)
	if max := r.cfg.MaxResponseBytes; int64(len(content)) > max {
		return failed(outcomeToolError, fmt.Errorf("result exceeds %d bytes", max), "response exceeds %d bytes", max)
	}
	if res.IsError {
		return failed(outcomeToolError, errors.New("the mcp tool reported an error"), "%s",
			cmp.Or(strings.TrimPrefix(content, "Error: "), "the tool reported an error"))
	}
	return succeeded(content)
}

// mcpErrorText picks the part of an SDK error that matters to the model:
// the SDK wraps transport failures in a JSON-RPC "rejected by transport"
// error whose own message says nothing, so a refusal by the address policy
// is dug out; anything else keeps its full chain.
func mcpErrorText(err error) error {
	var blocked *netguard.AddressError
	if errors.As(err, &blocked) {
		return blocked
	}
	var redirect *redirectError
	if errors.As(err, &redirect) {
		return redirect
	}
	var origin *originError
	if errors.As(err, &origin) {
		return origin
	}
	return err
}

// resultText is the content of a tool result as text: the text parts
// joined, other parts described briefly (a model gets text), or the
// structured content as JSON when there is nothing else.
func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image: %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio: %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link: %s]", c.URI))
		case *mcp.EmbeddedResource:
			switch {
			case c.Resource == nil:
				parts = append(parts, "[resource]")
			case c.Resource.Text != "":
				parts = append(parts, c.Resource.Text)
			default:
				parts = append(parts, fmt.Sprintf("[resource: %s, %s, %d bytes]", c.Resource.URI, c.Resource.MIMEType, len(c.Resource.Blob)))
			}
		default:
			parts = append(parts, fmt.Sprintf("[%T content]", c))
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			return string(b)
		}
	}
	return strings.Join(parts, "\n")
}

// mcpKey names a session: one per chat and server, because an MCP session
// carries state (the server may offer a session different tools, or keep
// per-session data) that must not leak from one chat to another. The
// transport and the headers are part of it: a tool of the same server with
// other credentials has its own session.
type mcpKey struct {
	chatID, url, transport string
	// headers is the tool's headers in a canonical form: literal values
	// and the names of secrets, never a secret's value, so that a key can
	// be printed.
	headers string
}

// mcpTarget is a session's key and the headers its requests carry, the
// secrets' values resolved.
type mcpTarget struct {
	key     mcpKey
	headers http.Header
}

// mcpTargetOf is the session of a call of impl in a chat.
func (r *Runner) mcpTargetOf(chatID string, impl *implementation) mcpTarget {
	var b strings.Builder
	for _, k := range sortedKeys(impl.Headers) {
		fmt.Fprintf(&b, "%s: %q\n", k, impl.Headers[k])
	}
	for _, k := range sortedKeys(impl.SecretHeaders) {
		fmt.Fprintf(&b, "%s: secret %q\n", k, impl.SecretHeaders[k])
	}
	var h http.Header
	if all := r.requestHeaders(impl); len(all) > 0 {
		h = make(http.Header, len(all))
		for k, v := range all {
			h.Set(k, v)
		}
	}
	return mcpTarget{
		key:     mcpKey{chatID: chatID, url: impl.URL.String(), transport: cmp.Or(impl.Transport, MCPStreamableHTTP), headers: b.String()},
		headers: h,
	}
}

// mcpPool holds the MCP sessions of a Runner. A session is opened on first
// use, shared by the chat's concurrent calls, and closed after
// MCPIdleTimeout without use, by ReleaseChat, or by Close.
type mcpPool struct {
	r      *Runner
	client *mcp.Client
	// afterFunc is time.AfterFunc; tests replace it to fire idle timers
	// when they choose.
	afterFunc func(time.Duration, func()) stopper

	mu     sync.Mutex
	closed bool
	conns  map[mcpKey]*mcpConn
	// wg counts connect goroutines and armed idle timers, so Close returns
	// with none left.
	wg sync.WaitGroup
}

// stopper is what mcpPool needs of a *time.Timer.
type stopper interface{ Stop() bool }

// mcpConn is one session. cs and err are written once, before ready is
// closed; the other fields are guarded by mcpPool.mu.
type mcpConn struct {
	key   mcpKey
	ready chan struct{}
	cs    *mcp.ClientSession
	err   error

	users    int     // calls using the session now
	dropped  bool    // no longer in the pool; the last user closes it
	gen      uint64  // bumped on every use; an idle timer of an older gen is stale
	timer    stopper // the armed idle timer, if any
	tools    []*mcp.Tool
	listedAt time.Time
}

func (p *mcpPool) init(r *Runner) {
	p.r = r
	p.conns = map[mcpKey]*mcpConn{}
	p.afterFunc = func(d time.Duration, f func()) stopper { return time.AfterFunc(d, f) }
	p.client = mcp.NewClient(&mcp.Implementation{Name: "agentd", Version: "1"}, &mcp.ClientOptions{
		// agentd offers a server nothing: no roots (no files of ours to
		// read), no sampling, no elicitation.
		Capabilities: &mcp.ClientCapabilities{},
	})
}

// acquire returns the session of key, connecting if there is none. The
// caller must release it.
func (p *mcpPool) acquire(ctx context.Context, tg mcpTarget, timeout time.Duration) (*mcpConn, error) {
	key := tg.key
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errRunnerClosed
	}
	c := p.conns[key]
	if c == nil {
		c = &mcpConn{key: key, ready: make(chan struct{})}
		p.conns[key] = c
		// The connect runs on its own, under the runner's context: every
		// caller waiting for it can give up on its own context without
		// failing the others.
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			c.cs, c.err = p.connect(tg, timeout)
			close(c.ready)
		}()
	}
	c.users++
	c.gen++
	p.stopTimer(c)
	p.mu.Unlock()

	select {
	case <-c.ready:
	case <-ctx.Done():
		p.release(c)
		return nil, context.Cause(ctx)
	}
	if c.err != nil {
		p.drop(c)
		p.release(c)
		return nil, c.err
	}
	return c, nil
}

// connect opens a session with the server of tg, over its transport and
// with its headers.
func (p *mcpPool) connect(tg mcpTarget, timeout time.Duration) (*mcp.ClientSession, error) {
	key := tg.key
	u, err := url.Parse(key.url)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	// The SSE transport's event stream lives as long as the session, under
	// the connect's context: that context must outlive the connect, so the
	// timeout cuts only a connect still under way, and the context ends
	// with the session or the runner.
	ctx, cancel := context.WithCancel(p.r.ctx)
	timer := time.AfterFunc(timeout, cancel)
	client := *p.r.mcpClient
	st := sessionTransport{next: client.Transport, scheme: u.Scheme, host: u.Host, headers: tg.headers,
		refused: new(atomic.Pointer[originError])}
	client.Transport = st
	var t mcp.Transport
	if key.transport == MCPSSE {
		t = &mcp.SSEClientTransport{Endpoint: key.url, HTTPClient: &client, MaxEventSize: int(mcpMaxBody(p.r.cfg.MaxResponseBytes))}
	} else {
		t = &mcp.StreamableClientTransport{
			Endpoint:   key.url,
			HTTPClient: &client,
			// Only responses to our own requests matter; a standing GET stream
			// per session would hold a connection and goroutines for nothing.
			DisableStandaloneSSE: true,
			MaxEventSize:         int(mcpMaxBody(p.r.cfg.MaxResponseBytes)),
		}
	}
	cs, err := p.client.Connect(ctx, t, nil)
	if !timer.Stop() && err == nil {
		err = fmt.Errorf("timed out after %s", timeout)
		_ = cs.Close()
	}
	if err != nil {
		cancel()
		if o := st.refused.Load(); o != nil && !errors.As(err, new(*originError)) {
			// The SDK may report the session's end (the stream closing)
			// rather than the refused request that ended it.
			return nil, fmt.Errorf("connect: %w (%v)", o, err)
		}
		return nil, fmt.Errorf("connect: %w", err)
	}
	if key.transport != MCPSSE {
		cancel() // the streamable transport's requests have contexts of their own
		return cs, nil
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		_ = cs.Wait()
		cancel()
	}()
	return cs, nil
}

// sessionTransport is the transport of one MCP session. It keeps the
// session's requests at the server's origin: an SSE server names the URL
// its client posts messages to, and one on another host is refused, as
// AgentChat's MCP client refuses it (the host allow-list was checked on the
// server's URL, not on what the server names). Redirects are judged by
// checkRedirect instead. The tool's headers (often a credential) are added
// to requests to the server's own origin only.
type sessionTransport struct {
	next         http.RoundTripper
	scheme, host string
	headers      http.Header
	// refused holds the last request refused for its origin.
	refused *atomic.Pointer[originError]
}

// originError is a request of an MCP session to another origin, refused.
type originError struct {
	to     *url.URL
	origin string
}

func (e *originError) Error() string {
	return fmt.Sprintf("the server named %s, which is not at its origin %s", e.to.Redacted(), e.origin)
}

// RoundTrip implements http.RoundTripper.
func (s sessionTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	sameOrigin := strings.EqualFold(req.URL.Scheme, s.scheme) && strings.EqualFold(req.URL.Host, s.host)
	if !sameOrigin && req.Response == nil {
		err := &originError{to: req.URL, origin: s.scheme + "://" + s.host}
		s.refused.Store(err)
		return nil, err
	}
	if len(s.headers) == 0 || !sameOrigin {
		return s.next.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	for k, v := range s.headers {
		req.Header[k] = v
	}
	return s.next.RoundTrip(req)
}

// release ends one use of c. The last user of a dropped session closes it;
// an idle session in the pool gets an idle timer.
func (p *mcpPool) release(c *mcpConn) {
	p.mu.Lock()
	c.users--
	if c.users > 0 {
		p.mu.Unlock()
		return
	}
	if c.dropped || p.closed {
		p.mu.Unlock()
		c.close()
		return
	}
	gen := c.gen
	p.wg.Add(1)
	c.timer = p.afterFunc(p.r.cfg.MCPIdleTimeout, func() {
		defer p.wg.Done()
		p.expire(c, gen)
	})
	p.mu.Unlock()
}

// expire closes c if it has been idle since the timer of gen was armed.
func (p *mcpPool) expire(c *mcpConn, gen uint64) {
	p.mu.Lock()
	if c.gen != gen || c.users > 0 || c.dropped {
		p.mu.Unlock()
		return
	}
	c.timer = nil
	p.dropLocked(c)
	p.mu.Unlock()
	c.close()
}

// stopTimer disarms c's idle timer. p.mu is held.
func (p *mcpPool) stopTimer(c *mcpConn) {
	if c.timer != nil && c.timer.Stop() {
		p.wg.Done() // the timer's function will not run
	}
	c.timer = nil
}

// drop takes c out of the pool, so the next caller connects afresh.
func (p *mcpPool) drop(c *mcpConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropLocked(c)
}

func (p *mcpPool) dropLocked(c *mcpConn) {
	if p.conns[c.key] == c {
		delete(p.conns, c.key)
	}
	c.dropped = true
	p.stopTimer(c)
}

// close closes the session once it is connected.
func (c *mcpConn) close() {
	<-c.ready
	if c.cs != nil {
		_ = c.cs.Close() // best effort: the server may be gone already
	}
}

// releaseChat closes the sessions of one chat; those in use close when
// their last call returns.
func (p *mcpPool) releaseChat(chatID string) {
	var idle []*mcpConn
	p.mu.Lock()
	for key, c := range p.conns {
		if key.chatID != chatID {
			continue
		}
		p.dropLocked(c)
		if c.users == 0 {
			idle = append(idle, c)
		}
	}
	p.mu.Unlock()
	for _, c := range idle {
		c.close()
	}
}

// closeAll closes every session and waits for connects and timers to end.
// Sessions in use are closed too: their calls fail.
func (p *mcpPool) closeAll() error {
	p.mu.Lock()
	p.closed = true
	conns := make([]*mcpConn, 0, len(p.conns))
	for _, c := range p.conns {
		conns = append(conns, c)
		p.dropLocked(c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	p.wg.Wait()
	return nil
}

// sessionFailed reports whether err means the session itself is unusable
// (as opposed to one request failing), and drops it from the pool if so.
func (p *mcpPool) sessionFailed(c *mcpConn, err error) bool {
	var werr *jsonrpc.Error
	if errors.As(err, &werr) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false // the server answered, or this call ran out of time
	}
	p.drop(c)
	return true
}

// list returns the server's tools, from the session's cache when it is
// younger than MCPListTTL. A listing that fails because the session broke
// is tried once more on a new session: listing has no side effects.
func (p *mcpPool) list(ctx context.Context, tg mcpTarget, timeout time.Duration) ([]*mcp.Tool, error) {
	for attempt := 0; ; attempt++ {
		c, err := p.acquire(ctx, tg, timeout)
		if err != nil {
			return nil, err
		}
		p.mu.Lock()
		tools, fresh := c.tools, c.tools != nil && time.Since(c.listedAt) < p.r.cfg.MCPListTTL
		p.mu.Unlock()
		if fresh {
			p.release(c)
			return tools, nil
		}
		tools = []*mcp.Tool{}
		for t, lerr := range c.cs.Tools(ctx, nil) {
			if lerr != nil {
				err = lerr
				break
			}
			tools = append(tools, t)
		}
		if err == nil {
			p.mu.Lock()
			c.tools, c.listedAt = tools, time.Now()
			p.mu.Unlock()
			p.release(c)
			return tools, nil
		}
		broken := p.sessionFailed(c, err)
		p.release(c)
		if !broken || attempt > 0 || ctx.Err() != nil {
			return nil, err
		}
	}
}

// call calls a tool. It is retried on a new session only when the server
// says the session does not exist (it restarted, or expired the session):
// then the call cannot have run. Any other failure may have happened after
// the tool did its work, so it is reported, not repeated.
func (p *mcpPool) call(ctx context.Context, tg mcpTarget, timeout time.Duration, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	for attempt := 0; ; attempt++ {
		c, err := p.acquire(ctx, tg, timeout)
		if err != nil {
			return nil, err
		}
		res, err := c.cs.CallTool(ctx, params)
		if err == nil {
			p.release(c)
			return res, nil
		}
		p.sessionFailed(c, err)
		p.release(c)
		if !errors.Is(err, mcp.ErrSessionMissing) || attempt > 0 || ctx.Err() != nil {
			return nil, err
		}
	}
}
