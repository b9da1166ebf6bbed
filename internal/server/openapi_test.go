package server

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/agentd/agentd/api"
	"github.com/agentd/agentd/internal/chat"
)

func openAPIDoc(t *testing.T) []byte {
	t.Helper()
	if len(api.OpenAPI) == 0 {
		t.Fatal("api.OpenAPI is empty")
	}
	return api.OpenAPI
}

// httpMethods are the operation keys of an OpenAPI path item.
var httpMethods = map[string]bool{"get": true, "put": true, "post": true, "delete": true,
	"options": true, "head": true, "patch": true, "trace": true}

// documentedRoutes returns "METHOD /path" for every operation under paths:
// of an OpenAPI document. It understands just enough YAML for that, under
// the document's own layout (two-space indentation, block mappings): a path
// is a key indented by 2 under the top-level paths key, an operation an
// HTTP-method key indented by 4 under a path. A layout it does not
// understand yields no routes for that part, which the comparison with the
// router then reports, so it cannot pass by accident.
func documentedRoutes(doc []byte) (map[string]bool, error) {
	routes := map[string]bool{}
	inPaths, sawPaths := false, false
	path := ""
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if strings.Contains(line, "\t") {
			return nil, fmt.Errorf("line %d: tab in indentation", n)
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		if indent == 0 {
			inPaths = trimmed == "paths:"
			sawPaths = sawPaths || inPaths
			path = ""
			continue
		}
		if !inPaths {
			continue
		}
		key, ok := yamlKey(trimmed)
		switch {
		case indent == 2:
			if !ok || !strings.HasPrefix(key, "/") {
				return nil, fmt.Errorf("line %d: expected a path key under paths, got %q", n, trimmed)
			}
			path = key
		case indent == 4 && ok && httpMethods[key]:
			if path == "" {
				return nil, fmt.Errorf("line %d: operation outside a path", n)
			}
			routes[strings.ToUpper(key)+" "+path] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !sawPaths {
		return nil, fmt.Errorf("no top-level paths: key")
	}
	return routes, nil
}

// yamlKey returns the key of a "key:" or "key: value" line, unquoted.
func yamlKey(line string) (string, bool) {
	if strings.HasPrefix(line, "- ") {
		return "", false
	}
	var key string
	switch {
	case strings.HasSuffix(line, ":"):
		key = strings.TrimSuffix(line, ":")
	case strings.Contains(line, ": "):
		key, _, _ = strings.Cut(line, ": ")
	default:
		return "", false
	}
	key = strings.TrimSpace(key)
	if len(key) >= 2 && (key[0] == '\'' || key[0] == '"') && key[len(key)-1] == key[0] {
		key = key[1 : len(key)-1]
	}
	return key, true
}

// servedRoutes returns "METHOD /path" for every route of the router.
func servedRoutes(t *testing.T, r chi.Routes) map[string]bool {
	t.Helper()
	routes := map[string]bool{}
	err := chi.Walk(r, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routes[method+" "+normalizeRoute(route)] = true
		return nil
	})
	if err != nil {
		t.Fatalf("walk router: %v", err)
	}
	return routes
}

// The contract and the router agree: every served route is documented and
// every documented route is served.
func TestOpenAPIMatchesRouter(t *testing.T) {
	t.Parallel()
	documented, err := documentedRoutes(openAPIDoc(t))
	if err != nil {
		t.Fatalf("parse api/openapi.yaml: %v", err)
	}
	ts := newTestServer(t, Config{}, &fakeChats{})
	served := servedRoutes(t, ts.router)
	if len(served) < 10 {
		t.Fatalf("walked only %d routes: %v", len(served), served)
	}
	for _, r := range slices.Sorted(maps.Keys(served)) {
		if !documented[r] {
			t.Errorf("%s is served but not documented in api/openapi.yaml", r)
		}
	}
	for _, r := range slices.Sorted(maps.Keys(documented)) {
		if !served[r] {
			t.Errorf("%s is documented in api/openapi.yaml but not served", r)
		}
	}
}

// The route parser finds what it should, so the comparison above means something.
func TestDocumentedRoutesParser(t *testing.T) {
	t.Parallel()
	doc := `openapi: 3.1.0
paths:
  /a:
    get:
      responses:
        '200':
          description: ok
    post:
      summary: x
  '/b/{id}':
    # a comment
    delete: {}
    parameters: []
components:
  schemas:
    get:
      type: object
`
	got, err := documentedRoutes([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"GET /a": true, "POST /a": true, "DELETE /b/{id}": true}
	if !maps.Equal(got, want) {
		t.Errorf("routes = %v, want %v", got, want)
	}
	if _, err := documentedRoutes([]byte("openapi: 3.1.0\n")); err == nil {
		t.Error("a document without paths parsed")
	}
}

// The enums of the contract list exactly the domain's statuses, stop reasons
// and event types (they are public API: docs/chat-specs.md, api/openapi.yaml).
func TestOpenAPIEnums(t *testing.T) {
	t.Parallel()
	doc := string(openAPIDoc(t))
	var statuses []string
	for _, s := range chat.AllStatuses {
		statuses = append(statuses, string(s))
	}
	var stopNames []string
	for _, s := range chat.AllStopReasons {
		stopNames = append(stopNames, string(s))
	}
	events := []chat.EventType{chat.EventChatCreated, chat.EventChatRunning, chat.EventSpeakerSelected, chat.EventMessage,
		chat.EventInputRequested, chat.EventChatCompleted, chat.EventChatFailed, chat.EventChatCancelled, chat.EventRunStarted, chat.EventContextUpdated, chat.EventMessageDelta}
	var eventNames []string
	for _, e := range events {
		eventNames = append(eventNames, string(e))
		if !strings.Contains(doc, "const: "+string(e)+"\n") {
			t.Errorf("no event schema for %s (const: %s)", e, e)
		}
	}
	for name, values := range map[string][]string{"Status": statuses, "StopReason": stopNames, "EventType": eventNames} {
		line := "enum: [" + strings.Join(values, ", ") + "]"
		if !strings.Contains(doc, line) {
			t.Errorf("%s: api/openapi.yaml lacks %q", name, line)
		}
	}
}

func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Config{APIKeys: map[string]string{"k": "t"}}, &fakeChats{})
	// Tools get YAML's registered type; a browser's page load (Chromium's
	// and Firefox's Accept) gets text it shows instead of saving.
	for _, c := range []struct{ accept, want string }{
		{"", "application/yaml"},
		{"application/yaml", "application/yaml"},
		{"*/*", "application/yaml"},
		{"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8", "text/plain; charset=utf-8"},
		{"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7", "text/plain; charset=utf-8"},
	} {
		var header []string
		if c.accept != "" {
			header = []string{"Accept", c.accept}
		}
		rec := ts.do(t, http.MethodGet, "/openapi.yaml", "", header...)
		h := rec.Header()
		if rec.Code != http.StatusOK || h.Get("Content-Type") != c.want || h.Get("X-Content-Type-Options") != "nosniff" ||
			!strings.HasPrefix(h.Get("Content-Disposition"), "inline") || !slices.Contains(h.Values("Vary"), "Accept") {
			t.Errorf("Accept %q: status %d, headers %v, want Content-Type %q, inline, nosniff, Vary: Accept", c.accept, rec.Code, h, c.want)
		}
		if !bytes.Equal(rec.Body.Bytes(), api.OpenAPI) {
			t.Errorf("Accept %q: served document differs from api.OpenAPI", c.accept)
		}
	}
	if !bytes.HasPrefix(api.OpenAPI, []byte("openapi: 3.1")) {
		t.Error("api/openapi.yaml is not an OpenAPI 3.1 document")
	}
}
