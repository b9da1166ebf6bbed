package tool

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/netguard"
)

// maxRedirects is how many redirects a tool request follows.
const maxRedirects = 5

// excerptBytes is how much of a failed response's body goes into the error
// content: enough for a server's error message, not a whole error page.
const excerptBytes = 300

// newTransport returns the HTTP transport of tool requests. Its dialer
// enforces the address policy on every connection (see internal/netguard); Proxy is
// nil on purpose, since the environment's proxy would hide the real
// destination from that check.
func newTransport(p netguard.Policy) *http.Transport {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: p.Control}
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   10,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// redirectError is a redirect the runner refused to follow.
type redirectError struct {
	to  *url.URL
	why string
}

func (e *redirectError) Error() string {
	return fmt.Sprintf("redirect to %s refused: %s", e.to.Redacted(), e.why)
}

// checkRedirect is the CheckRedirect of tool clients: redirects are few,
// stay on http(s) and on the allow-list. The address they lead to is
// checked by the dialer like any other. Headers from the tool spec (often an
// API key) are not sent to another host: net/http drops Authorization and
// Cookie on such a redirect but forwards the rest.
func (r *Runner) checkRedirect(req *http.Request, via []*http.Request) error {
	switch {
	case len(via) >= maxRedirects:
		return &redirectError{to: req.URL, why: fmt.Sprintf("stopped after %d redirects", maxRedirects)}
	case req.URL.Scheme != "http" && req.URL.Scheme != "https":
		return &redirectError{to: req.URL, why: "not an http or https URL"}
	case req.URL.User != nil:
		return &redirectError{to: req.URL, why: "URL with credentials"}
	case !r.allow.AllowsURL(req.URL):
		return &redirectError{to: req.URL, why: "host " + req.URL.Host + " is not in this server's allow-list of tool hosts"}
	}
	if first := via[0]; !strings.EqualFold(first.URL.Host, req.URL.Host) {
		if extra, ok := first.Context().Value(specHeadersKey{}).([]string); ok {
			for _, h := range extra {
				req.Header.Del(h)
			}
		}
	}
	return nil
}

// specHeadersKey marks, in a request's context, the header names that came
// from the tool spec, for checkRedirect.
type specHeadersKey struct{}

// httpCallBody is what an http tool receives (docs/tools.md).
type httpCallBody struct {
	Name       string          `json:"name"`
	Arguments  json.RawMessage `json:"arguments"`
	ChatID     string          `json:"chat_id"`
	ToolCallID string          `json:"tool_call_id"`
}

// callHTTP POSTs the call to the tool's URL and returns the response body.
func (r *Runner) callHTTP(ctx context.Context, req *chat.ToolRequest, impl *implementation, args arguments) outcome {
	body, err := json.Marshal(httpCallBody{
		Name: cmp.Or(req.Function.Name, req.Tool.Name), Arguments: args.raw, ChatID: req.ChatID, ToolCallID: req.CallID,
	})
	if err != nil {
		return failed(outcomeFailed, err, "could not encode the request: %v", err)
	}
	headers := r.requestHeaders(impl)
	names := make([]string, 0, len(headers))
	for k := range headers {
		names = append(names, k)
	}
	ctx = context.WithValue(ctx, specHeadersKey{}, names)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, impl.URL.String(), bytes.NewReader(body))
	if err != nil {
		return failed(outcomeFailed, err, "could not build the request: %v", err)
	}
	for k, v := range headers {
		hreq.Header.Set(k, v)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("User-Agent", "agentd")
	// The same key on every attempt of this call (also when a crash makes
	// another replica redo the turn): the tool server can deduplicate.
	hreq.Header.Set("Idempotency-Key", req.ChatID+"/"+req.CallID)

	resp, err := r.httpClient.Do(hreq)
	if err != nil {
		return httpError(impl.URL, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, excerptBytes))
		return failed(outcomeToolError, fmt.Errorf("HTTP %s", resp.Status), "HTTP %s%s", resp.Status, excerptSuffix(excerpt, excerptBytes))
	}
	content, o, ok := r.readCapped(resp)
	if !ok {
		return o
	}
	return succeeded(content)
}

// readCapped reads a response body of at most MaxResponseBytes.
func (r *Runner) readCapped(resp *http.Response) (string, outcome, bool) {
	max := r.cfg.MaxResponseBytes
	tooBig := func() outcome {
		return failed(outcomeToolError, fmt.Errorf("response exceeds %d bytes", max), "response exceeds %d bytes", max)
	}
	// Refuse early what announces itself as too big; count the rest.
	if resp.ContentLength > max {
		return "", tooBig(), false
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return "", failed(outcomeFailed, err, "reading the response failed: %v", err), false
	}
	if int64(len(b)) > max {
		return "", tooBig(), false
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), outcome{}, true
}

// httpError turns a failed request into an outcome, telling refusals (the
// policy at work) from failures.
func httpError(u *url.URL, err error) outcome {
	var blocked *netguard.AddressError
	var redirect *redirectError
	switch {
	case errors.As(err, &blocked):
		return failed(outcomeRefused, err, "refused to connect: %v", blocked)
	case errors.As(err, &redirect):
		return failed(outcomeRefused, err, "%v", redirect)
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err // its message repeats the method and URL
	}
	return failed(outcomeFailed, err, "request to %s failed: %v", u.Redacted(), err)
}

// excerptSuffix formats the start of a body for an error message: ": " and
// the text, trimmed and marked when cut, or "" for an empty body.
func excerptSuffix(b []byte, max int) string {
	cut := len(b) >= max
	for i := 0; cut && i < utf8.UTFMax-1 && len(b) > 0; i++ {
		// Do not end inside a multi-byte character.
		if r, size := utf8.DecodeLastRune(b); r != utf8.RuneError || size != 1 {
			break
		}
		b = b[:len(b)-1]
	}
	s := strings.TrimSpace(strings.ToValidUTF8(string(b), "\uFFFD"))
	if s == "" {
		return ""
	}
	if cut {
		s += " …"
	}
	return ": " + s
}

// capBodies wraps a transport so that no response body yields more than max
// bytes: the MCP SDK reads JSON responses whole, and a hostile server must
// not be able to make it buffer gigabytes.
type capBodies struct {
	next http.RoundTripper
	max  int64
}

// RoundTrip implements http.RoundTripper.
func (c capBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &cappedBody{ReadCloser: resp.Body, left: c.max}
	return resp, nil
}

// errBodyTooLarge ends a body that went past its cap.
var errBodyTooLarge = errors.New("response body too large")

// cappedBody fails reads once more than its cap has been read.
type cappedBody struct {
	io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errBodyTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// mcpMaxBody is the cap of one MCP response body: the result's text may
// reach MaxResponseBytes, and JSON escaping and the protocol's envelope add
// to it (a control character takes six bytes escaped).
func mcpMaxBody(maxResponse int64) int64 {
	return 6*maxResponse + 64<<10
}
