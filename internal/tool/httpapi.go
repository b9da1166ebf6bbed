package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/pyfunc"
	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/spec/problem"
)

// An http_api tool calls a REST API as AgentChat's HttpTool does: the
// model's arguments, validated by the model AgentChat builds from the
// tool's JSON Schema (its parameters), fill the {name} parameters of the
// URL's path; the others go into the query (GET, DELETE) or a JSON body
// (POST, PUT, PATCH); the result is the response's body as text, or, with
// return_type json, Python's str() of the decoded JSON, whatever the
// status. Redirects are not followed (httpx's default). The URL obeys the
// tool host allow-list and the address rules like every tool's.

// HTTP methods an http_api tool may use (HttpTool's).
var httpAPIMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch}

// Return types of an http_api tool.
const (
	returnText = "text"
	returnJSON = "json"
)

// pathParam is a parameter of an http_api tool's path, as HttpTool finds
// them ({name}); agentd takes only identifiers between the braces.
var pathParam = regexp.MustCompile(`\{([^}]*)\}`)

// checkHTTPAPI reads the fields of an http_api implementation.
func (r *Runner) checkHTTPAPI(d *decoder, impl *implementation) {
	raw := d.str("url", true)
	impl.URL = r.checkURL(d, raw)
	if impl.URL != nil {
		impl.PathTemplate = rawPath(raw)
		switch {
		case strings.ContainsAny(impl.PathTemplate, "?#"):
			d.add("url", "must not have a query or a fragment: HttpTool's path has neither (the arguments make the query)")
		case impl.URL.RawQuery != "" || impl.URL.Fragment != "":
			d.add("url", "must not have a query or a fragment: HttpTool's path has neither (the arguments make the query)")
		}
		rest := pathParam.ReplaceAllStringFunc(impl.PathTemplate, func(m string) string {
			name := m[1 : len(m)-1]
			if !pyfunc.IsASCIIName(name) {
				d.add("url", "path parameter %s must be a name of letters, digits and '_' between braces", m)
			}
			impl.PathParams = append(impl.PathParams, name)
			return ""
		})
		if strings.ContainsAny(rest, "{}") {
			d.add("url", "has a brace that is not part of a {name} path parameter")
		}
	}
	switch impl.Method = d.str("method", false); impl.Method {
	case "":
		impl.Method = http.MethodPost // HttpTool's default
	default:
		if !slices.Contains(httpAPIMethods, impl.Method) {
			d.add("method", "must be one of %s, not %q", strings.Join(httpAPIMethods, ", "), impl.Method)
		}
	}
	switch impl.ReturnType = d.str("return_type", false); impl.ReturnType {
	case "":
		impl.ReturnType = returnText
	case returnText, returnJSON:
	default:
		d.add("return_type", "must be text or json, not %q", impl.ReturnType)
	}
	impl.Headers, impl.SecretHeaders = d.headers("headers", r.cfg.Secrets, nil)
}

// rawPath is the path of a URL as written, braces and all ("" → "/").
func rawPath(s string) string {
	_, rest, _ := strings.Cut(s, "://")
	i := strings.IndexAny(rest, "/?#")
	if i < 0 {
		return "/"
	}
	return rest[i:]
}

// checkHTTPAPIParameters checks an http_api tool's parameters: a JSON
// Schema that agentd translates exactly as AgentChat's HttpTool does, with
// a property for each path parameter.
func checkHTTPAPIParameters(t *spec.Tool, impl *implementation) []spec.Problem {
	m, err := pyfunc.FromJSONSchema(t.Parameters)
	if err != nil {
		var se *pyfunc.SchemaError
		if errors.As(err, &se) {
			return []spec.Problem{{Path: "/parameters" + se.Pointer, Message: se.Message}}
		}
		return []spec.Problem{{Path: "/parameters", Message: err.Error()}}
	}
	var probs problem.List
	for _, p := range impl.PathParams {
		if !slices.ContainsFunc(m.Params, func(q pyfunc.Param) bool { return q.Name == p }) {
			probs.Add("/implementation/url", "path parameter {%s} is not a property of the parameters schema", p)
		}
	}
	return probs.Items()
}

// describeHTTPAPI is the function an http_api tool offers: its parameters
// as AgentChat shows the model its HttpTool's.
func describeHTTPAPI(t *spec.Tool) (chat.ToolDef, error) {
	m, err := pyfunc.FromJSONSchema(t.Parameters)
	if err != nil {
		return chat.ToolDef{}, fmt.Errorf("parameters: %w", err)
	}
	return chat.ToolDef{Name: t.Name, Description: t.Description, Parameters: m.Schema()}, nil
}

// httpAPIArguments validates a call's arguments as HttpTool's model does
// and returns its model_dump().
func httpAPIArguments(t *spec.Tool, raw json.RawMessage) ([]pyfunc.Field, error) {
	m, err := pyfunc.FromJSONSchema(t.Parameters)
	if err != nil {
		return nil, fmt.Errorf("the tool's parameters: %w", err)
	}
	return m.ModelDump(raw)
}

// callHTTPAPI makes the request of one call.
func (r *Runner) callHTTPAPI(ctx context.Context, req *chat.ToolRequest, impl *implementation, args arguments) outcome {
	fields, err := httpAPIArguments(req.Tool, args.raw)
	if err != nil {
		return failed(outcomeInvalidArguments, err, "%v", err)
	}
	path, query, body, err := httpAPIRequest(impl, fields)
	if err != nil {
		return failed(outcomeInvalidArguments, err, "%v", err)
	}
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(*body)
	}
	u := &url.URL{Scheme: impl.URL.Scheme, Host: impl.URL.Host, RawQuery: query}
	hreq, err := http.NewRequestWithContext(ctx, impl.Method, u.String(), rd)
	if err != nil {
		return failed(outcomeFailed, err, "could not build the request: %v", err)
	}
	// The path goes out exactly as httpx writes it ("|" and a lone "%"
	// stay), which net/url would re-encode: as the URL's opaque part, the
	// request line holds it as it is. One starting with "//" would read as
	// an authority there; it takes the ordinary route.
	if strings.HasPrefix(path, "//") {
		hreq.URL.Path, _ = url.PathUnescape(path)
		hreq.URL.RawPath = path
	} else {
		hreq.URL.Opaque = path
	}
	for k, v := range r.requestHeaders(impl) {
		hreq.Header.Set(k, v)
	}
	if body != nil {
		hreq.Header.Set("Content-Type", "application/json")
	}
	hreq.Header.Set("User-Agent", "agentd")
	resp, err := r.apiClient.Do(hreq)
	if err != nil {
		return httpError(impl.URL, err)
	}
	defer resp.Body.Close()
	content, o, ok := r.readCappedBytes(resp)
	if !ok {
		return o
	}
	if impl.ReturnType == returnJSON {
		v, err := pyfunc.ParseJSON(content)
		if err != nil {
			return failed(outcomeToolError, err, "the response (HTTP %s) is not JSON: %v", resp.Status, err)
		}
		return succeeded(v.Str())
	}
	return succeeded(decodeText(content, resp.Header.Get("Content-Type")))
}

// httpAPIRequest is the encoded path, the query and the body of a call, as
// HttpTool.run makes them with httpx: the path parameters formatted with
// str() into the path (dot segments removed, percent-encoded as httpx
// encodes a path), the rest as query parameters or a JSON body.
func httpAPIRequest(impl *implementation, fields []pyfunc.Field) (path, query string, body *string, err error) {
	values := map[string]pyfunc.Value{}
	var rest []pyfunc.Field
	for _, f := range fields {
		if slices.Contains(impl.PathParams, f.Name) {
			values[f.Name] = f.Value
		} else {
			rest = append(rest, f)
		}
	}
	path = pathParam.ReplaceAllStringFunc(impl.PathTemplate, func(m string) string {
		return values[m[1:len(m)-1]].Str()
	})
	for i := 0; i < len(path); i++ {
		if c := path[i]; c < 0x20 || c == 0x7f {
			return "", "", nil, fmt.Errorf("a path parameter puts the control character %q into the URL's path", rune(c))
		}
	}
	if strings.ContainsAny(path, "?#") {
		return "", "", nil, fmt.Errorf("a path parameter puts '?' or '#' into the URL's path, which HttpTool refuses (Invalid URL component 'path')")
	}
	path = escapePath(removeDotSegments(path))
	switch impl.Method {
	case http.MethodGet, http.MethodDelete:
		var q []string
		for _, f := range rest {
			items, isList := f.Value.Items()
			if !isList {
				items = []pyfunc.Value{f.Value}
			}
			for _, it := range items {
				q = append(q, url.QueryEscape(f.Name)+"="+url.QueryEscape(primitiveString(it)))
			}
		}
		return path, strings.Join(q, "&"), nil, nil
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, f := range rest {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + f.Name + `"`) // an identifier: nothing to escape
		b.WriteByte(':')
		b.WriteString(f.Value.DumpJSON())
	}
	b.WriteByte('}')
	s := b.String()
	return path, "", &s, nil
}

// primitiveString is httpx's primitive_value_to_str: JSON's true and
// false, "" for None, str() of anything else.
func primitiveString(v pyfunc.Value) string {
	if b, ok := v.Bool(); ok {
		return map[bool]string{true: "true", false: "false"}[b]
	}
	if v.IsNone() {
		return ""
	}
	return v.Str()
}

// removeDotSegments drops "." and ".." segments from a path, as httpx
// does before it encodes one (RFC 3986 §5.2.4).
func removeDotSegments(path string) string {
	segs := strings.Split(path, "/")
	if !slices.Contains(segs, ".") && !slices.Contains(segs, "..") {
		return path
	}
	var out []string
	for _, s := range segs {
		switch s {
		case ".":
		case "..":
			if len(out) > 0 && !(len(out) == 1 && out[0] == "") {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, s)
		}
	}
	return strings.Join(out, "/")
}

// escapePath percent-encodes a path as httpx does: unreserved characters
// and those of the WHATWG path set stay (so does '%', which keeps escapes
// already there), every other byte is %XX.
func escapePath(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c >= 0x21 && c < 0x7f && !strings.ContainsRune("\"#<>?`{}", rune(c)) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// readCappedBytes reads a response body of at most MaxResponseBytes.
func (r *Runner) readCappedBytes(resp *http.Response) ([]byte, outcome, bool) {
	max := r.cfg.MaxResponseBytes
	tooBig := func() outcome {
		return failed(outcomeToolError, fmt.Errorf("response exceeds %d bytes", max), "response exceeds %d bytes", max)
	}
	if resp.ContentLength > max {
		return nil, tooBig(), false
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, failed(outcomeFailed, err, "reading the response failed: %v", err), false
	}
	if int64(len(b)) > max {
		return nil, tooBig(), false
	}
	return b, outcome{}, true
}

// decodeText is httpx's Response.text: the body decoded with the charset
// of its Content-Type (UTF-8 when it names none), undecodable bytes
// replaced. agentd decodes UTF-8, ASCII and Latin-1; other charsets are
// read as UTF-8.
func decodeText(b []byte, contentType string) string {
	_, params, _ := mime.ParseMediaType(contentType)
	switch strings.ToLower(params["charset"]) {
	case "iso-8859-1", "latin-1", "latin1", "l1":
		r := make([]rune, len(b))
		for i, c := range b {
			r[i] = rune(c)
		}
		return string(r)
	case "ascii", "us-ascii":
		r := make([]rune, len(b))
		for i, c := range b {
			r[i] = rune(c)
			if c > 0x7f {
				r[i] = utf8.RuneError
			}
		}
		return string(r)
	}
	var s strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		s.WriteRune(r)
		b = b[n:]
	}
	return s.String()
}
