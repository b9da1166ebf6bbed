// Package console is agentd's web console: static HTML, CSS and JavaScript
// modules embedded in the binary, with no build step, no framework and no
// request to any origin but agentd's own. The console drives chats through
// the public /v1 API only, exactly as any other client does.
package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/agentd/agentd/examples"
)

//go:embed static
var static embed.FS

// redocBundle is Redoc's standalone bundle, vendored (see redoc/README.md),
// which renders the API reference page from the server's OpenAPI file.
//
//go:embed redoc/redoc.standalone.js
var redocBundle []byte

// RedocFile is the asset holding redocBundle.
const RedocFile = "redoc.standalone.js"

// ExamplesFile is the asset holding every example spec, by file name.
const ExamplesFile = "examples.json"

// contentSecurityPolicy allows the console's own scripts, styles and API
// calls and nothing else: no inline script, no other origin, no framing.
// So a page that renders model output can never be made to load or send
// anything elsewhere.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
	"img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// docsContentSecurityPolicy is the console's policy for the API reference
// page, with two inline style elements allowed by their hashes, no more:
// Redoc's styled-components creates an empty <style> that it fills
// through the CSSOM (which the policy does not govern), and Redoc injects
// perfect-scrollbar's CSS. 'unsafe-inline' would also let any injected
// markup style the page; a hash lets only those two texts. Redoc's
// sidebar logo, an image on cdn.redoc.ly, stays blocked by img-src.
const docsContentSecurityPolicy = "default-src 'none'; script-src 'self'; " +
	"style-src 'self' 'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=' 'sha256-QMIg+bpjm3JdElJ388KYke01izlUW0UoNOeKjpMxdgc='; " +
	"connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// asset is one file the console serves.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// Console serves the console's files. Create it with New.
type Console struct {
	assets map[string]asset
}

// New loads the embedded files and the example specs.
func New() (*Console, error) {
	c := &Console{assets: map[string]asset{}}
	entries, err := fs.ReadDir(static, "static")
	if err != nil {
		return nil, fmt.Errorf("console assets: %w", err)
	}
	for _, e := range entries {
		b, err := static.ReadFile("static/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("console asset %s: %w", e.Name(), err)
		}
		c.add(e.Name(), b)
	}
	ex, err := examplesJSON()
	if err != nil {
		return nil, err
	}
	c.add(ExamplesFile, ex)
	c.add(RedocFile, redocBundle)
	return c, nil
}

func (c *Console) add(name string, body []byte) {
	ct := mime.TypeByExtension(path.Ext(name))
	switch path.Ext(name) {
	// Set here, not from the host's MIME table, which may lack them or,
	// for .js, say text/plain (browsers refuse such modules).
	case ".js":
		ct = "text/javascript; charset=utf-8"
	case ".css":
		ct = "text/css; charset=utf-8"
	case ".html":
		ct = "text/html; charset=utf-8"
	case ".json":
		ct = "application/json"
	}
	sum := sha256.Sum256(body)
	c.assets[name] = asset{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
}

// Names returns the names of the assets served by ServeAsset.
func (c *Console) Names() []string {
	var names []string
	for n := range c.assets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ServeIndex serves the console's page (GET /).
func (c *Console) ServeIndex(w http.ResponseWriter, r *http.Request) {
	c.ServeAsset(w, r, "index.html")
}

// ServeDocs serves the API reference page (GET /docs), which Redoc renders
// from GET /openapi.yaml.
func (c *Console) ServeDocs(w http.ResponseWriter, r *http.Request) {
	c.serve(w, r, "docs.html", docsContentSecurityPolicy)
}

// ServeAsset serves one file (GET /console/{file}); it reports whether the
// file exists, so that the caller answers unknown names with its own 404.
func (c *Console) ServeAsset(w http.ResponseWriter, r *http.Request, name string) bool {
	return c.serve(w, r, name, contentSecurityPolicy)
}

func (c *Console) serve(w http.ResponseWriter, r *http.Request, name, csp string) bool {
	a, ok := c.assets[name]
	if !ok || strings.Contains(name, "/") {
		return false
	}
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	// Revalidate every time (cheap: the ETag answers 304), so a new binary's
	// console is never mixed with an old cached module.
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", a.etag)
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
	return true
}

// examplesJSON is {"debate.json": <spec>, …}, every example spec by name.
func examplesJSON() ([]byte, error) {
	names, err := fs.Glob(examples.FS, "*.json")
	if err != nil {
		return nil, err
	}
	all := map[string]json.RawMessage{}
	for _, n := range names {
		b, err := examples.FS.ReadFile(n)
		if err != nil {
			return nil, err
		}
		if !json.Valid(b) {
			return nil, fmt.Errorf("example %s is not valid JSON", n)
		}
		all[n] = b
	}
	return json.Marshal(all)
}
