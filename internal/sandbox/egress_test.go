//go:build linux

package sandbox

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/egress"
)

// tinyWheel builds a wheel of one pure-Python package, tinypkg, whose
// module holds magic.
func tinyWheel(t *testing.T, magic string) []byte {
	t.Helper()
	files := []struct{ name, body string }{
		{"tinypkg/__init__.py", fmt.Sprintf("MAGIC = %q\n", magic)},
		{"tinypkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n"},
		{"tinypkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: agentd-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, f.body)
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	record.WriteString("tinypkg-1.0.dist-info/RECORD,,\n")
	w, err := zw.Create("tinypkg-1.0.dist-info/RECORD")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, record.String())
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// packageIndex is a local stand-in for a package index (PEP 503 simple
// API) that serves tinypkg, and counts what it is asked for.
type packageIndex struct {
	*httptest.Server
	mu   sync.Mutex
	hits []string
}

// newPackageIndex starts the index, over HTTPS when tls (what pip uses for
// real indexes: through the proxy, that is a CONNECT tunnel). The project
// page is served under any prefix, so each test can tell its own requests.
func newPackageIndex(t *testing.T, wheel []byte, tls bool) *packageIndex {
	idx := &packageIndex{}
	sum := sha256.Sum256(wheel)
	const file = "tinypkg-1.0-py3-none-any.whl"
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		idx.mu.Lock()
		idx.hits = append(idx.hits, r.URL.Path)
		idx.mu.Unlock()
		switch {
		case strings.HasSuffix(r.URL.Path, "/simple/tinypkg/"):
			fmt.Fprintf(w, "<!DOCTYPE html><html><body><a href=\"/files/%s#sha256=%s\">%s</a></body></html>\n", file, hex.EncodeToString(sum[:]), file)
		case r.URL.Path == "/files/"+file:
			w.Write(wheel)
		case r.URL.Path == "/redirect":
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	})
	if tls {
		idx.Server = httptest.NewTLSServer(h)
	} else {
		idx.Server = httptest.NewServer(h)
	}
	t.Cleanup(idx.Close)
	return idx
}

func (p *packageIndex) port() int { return p.Listener.Addr().(*net.TCPAddr).Port }

func (p *packageIndex) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.hits...)
}

// hostileNames resolve to addresses no sandbox may reach; the proxy's
// resolver in these tests stands in for DNS servers that answer so.
var hostileNames = map[string]string{
	"loop.test": "127.0.0.1", "meta.test": "169.254.169.254", "ten.test": "10.1.2.3",
	"mapped.test": "::ffff:127.0.0.1", "six.test": "::1",
}

func testLookup(_ context.Context, _, host string) ([]netip.Addr, error) {
	if host == "localhost" {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	if a, ok := hostileNames[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// pipWheel is pip itself, from the host's python3-pip-whl: the sandbox
// image carries no pip, and pip runs from its wheel.
func pipWheel(t *testing.T) []byte {
	matches, _ := filepath.Glob("/usr/share/python-wheels/pip-*.whl")
	if len(matches) == 0 {
		if ci() {
			t.Fatal("CI=true and no pip wheel in /usr/share/python-wheels (apt-get install python3-pip-whl)")
		}
		t.Skip("no pip wheel in /usr/share/python-wheels (apt-get install python3-pip-whl)")
	}
	b, err := os.ReadFile(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// egressConfig is testConfig with an egress proxy whose operator list
// permits the servers (by name, and their loopback address by port, as an
// operator would for an internal package index) and *.test on the secret
// port.
func egressConfig(t *testing.T, backend string, secretPort int, ports ...int) (Config, *egress.Proxy) {
	cfg := testConfig(t, backend)
	hosts := []string{"*.test:" + strconv.Itoa(secretPort)}
	for _, p := range ports {
		hosts = append(hosts, "localhost:"+strconv.Itoa(p), "127.0.0.1:"+strconv.Itoa(p))
	}
	p, err := egress.New(egress.Config{
		AllowHosts:    hosts,
		HeaderTimeout: time.Second, IdleTimeout: 5 * time.Second,
		LookupNetIP: testLookup,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(context.Background()) })
	cfg.Egress = p
	// Long, as a data dir can be: the socket paths exceed the 107 bytes
	// of a unix socket's name.
	// Below the work root, whose parents the bwrap sandbox uid can search
	// (testConfig); a name that is no chat id, which Reap leaves alone.
	cfg.EgressDir = filepath.Join(cfg.WorkRoot, "."+strings.Repeat("long-egress-dir", 5))
	return cfg, p
}

// TestEgress: sandboxes that may reach hosts reach them through the proxy,
// and nothing else (docs/tools.md), on both backends.
func TestEgress(t *testing.T) {
	wheel := tinyWheel(t, "tinypkg-magic-4711")
	pip := pipWheel(t)
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			idx := newPackageIndex(t, wheel, true)
			web := newPackageIndex(t, wheel, false)
			secret := newSecret(t)
			cfg, _ := egressConfig(t, backend, secret.port(), idx.port(), web.port())
			m := open(t, cfg)
			t.Run("PipAllowed", func(t *testing.T) { t.Parallel(); testPipAllowed(t, m, idx, pip) })
			t.Run("PipRefused", func(t *testing.T) { t.Parallel(); testPipRefused(t, m, idx, pip, secret.port()) })
			if backend == "docker" {
				t.Run("ImagePip", func(t *testing.T) { t.Parallel(); testImagePip(t, m, idx) })
			}
			t.Run("EscapesRefused", func(t *testing.T) { t.Parallel(); testEgressEscapes(t, m, web, secret) })
			t.Run("NoNetworkWithoutHosts", func(t *testing.T) { t.Parallel(); testNoHosts(t, m, web) })
			t.Run("NetworkEndsWithRun", func(t *testing.T) { t.Parallel(); testNetworkEndsWithRun(t, m, web) })
		})
	}
}

// secret is a server on the host's loopback that no sandbox may reach:
// agentd's own port, a database, a metadata service.
type secret struct {
	ln       net.Listener
	accepted atomic.Int32
}

func newSecret(t *testing.T) *secret {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &secret{ln: ln}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return s
}

func (s *secret) port() int { return s.ln.Addr().(*net.TCPAddr).Port }

// netReq is a program of a chat that may reach hosts, with room for pip.
func netReq(chatID, lang, code string, hosts ...string) *chat.ExecRequest {
	return &chat.ExecRequest{ChatID: chatID, Language: lang, Code: code, Timeout: 2 * time.Minute,
		Limits: chat.SandboxLimits{MemoryMB: 512, AllowHosts: hosts}}
}

// putPip writes pip's wheel into the chat's work dir. Like every program of
// a chat, it runs with the chat's settings (the docker backend makes the
// container with the first one's).
func putPip(t *testing.T, m Manager, chatID string, pip []byte, hosts ...string) {
	req := netReq(chatID, "sh", "cat > pip.whl", hosts...)
	req.Stdin = pip
	res := run(t, m, req)
	if res.ExitCode != 0 {
		t.Fatalf("writing pip: exit %d: %s", res.ExitCode, res.Output)
	}
}

const pipFlags = "--no-cache-dir --disable-pip-version-check --no-input --timeout 20 --retries 0"

func testPipAllowed(t *testing.T, m Manager, idx *packageIndex, pip []byte) {
	id := newChat(t, m)
	host := fmt.Sprintf("localhost:%d", idx.port())
	putPip(t, m, id, pip, host)
	// --trusted-host: the test index's certificate is its own; the
	// connection is still a CONNECT tunnel through the proxy.
	code := fmt.Sprintf(`set -e
python3 pip.whl/pip download %[1]s --index-url https://%[2]s/simple/ --trusted-host %[2]s -d dl tinypkg
ls dl
python3 pip.whl/pip install %[1]s --index-url https://%[2]s/simple/ --trusted-host %[2]s --target lib tinypkg
python3 -c 'import sys; sys.path.insert(0, "lib"); import tinypkg; print("imported", tinypkg.MAGIC)'
`, pipFlags, host)
	res := run(t, m, netReq(id, "sh", code, host))
	t.Logf("sandbox says:\n%s", res.Output)
	if res.ExitCode != 0 {
		t.Fatalf("pip through the egress proxy: exit %d", res.ExitCode)
	}
	for _, want := range []string{"tinypkg-1.0-py3-none-any.whl", "Successfully installed tinypkg", "imported tinypkg-magic-4711"} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if got := strings.Join(idx.requests(), " "); !strings.Contains(got, "/simple/tinypkg/") || !strings.Contains(got, "/files/tinypkg-1.0-py3-none-any.whl") {
		t.Errorf("the index was asked for %q", got)
	}
}

// testImagePip: the default image's own pip installs as a model's code
// would ask it to, with no options: the root filesystem is read-only, so
// it installs for the sandbox user under /work/.local, where the chat's
// next program imports it.
func testImagePip(t *testing.T, m Manager, idx *packageIndex) {
	id := newChat(t, m)
	host := fmt.Sprintf("localhost:%d", idx.port())
	res := run(t, m, netReq(id, "sh", fmt.Sprintf("pip install --index-url https://%[1]s/simple/ --trusted-host %[1]s tinypkg", host), host))
	t.Logf("sandbox says:\n%s", res.Output)
	if res.ExitCode != 0 || !strings.Contains(res.Output, "Successfully installed tinypkg") {
		t.Fatalf("pip install in the sandbox image: exit %d", res.ExitCode)
	}
	res = run(t, m, netReq(id, "python", "import tinypkg\nprint('imported', tinypkg.MAGIC, tinypkg.__file__)", host))
	if res.ExitCode != 0 || !strings.Contains(res.Output, "imported tinypkg-magic-4711 /work/.local/") {
		t.Fatalf("the next program: exit %d: %s", res.ExitCode, res.Output)
	}
}

func testPipRefused(t *testing.T, m Manager, idx *packageIndex, pip []byte, secretPort int) {
	id := newChat(t, m)
	allowed := fmt.Sprintf("loop.test:%d", secretPort)
	putPip(t, m, id, pip, allowed)
	// The chat may reach a host, but not the index. One retry, so that pip
	// shows why it failed (it does so in its retry warning).
	host := fmt.Sprintf("localhost:%d", idx.port())
	code := fmt.Sprintf("python3 pip.whl/pip download %s --retries 1 --index-url https://%s/refused/simple/ --trusted-host %[2]s -d dl tinypkg",
		strings.Replace(pipFlags, "--retries 0", "", 1), host)
	res := run(t, m, netReq(id, "sh", code, allowed))
	t.Logf("sandbox says:\n%s", res.Output)
	if res.ExitCode == 0 {
		t.Fatal("pip downloaded from an index the chat may not reach")
	}
	for _, want := range []string{"Tunnel connection failed: 403", "sandbox.network.allow"} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("pip's output does not show the proxy's refusal (%q)", want)
		}
	}
	for _, p := range idx.requests() {
		if strings.HasPrefix(p, "/refused/") {
			t.Errorf("the index got %s from a chat that may not reach it", p)
		}
	}
}

// egressProbe is the hostile program: every way past the proxy, or through
// it to what is not allowed. Each line says REFUSED or REACHED.
const egressProbe = `import http.client, os, socket, time, urllib.request
proxy = os.environ.get("HTTP_PROXY", "")
print("proxy", proxy)
def attempt(name, f):
    try:
        r = f()
        print(name, "REACHED", r)
    except Exception as e:
        print(name, "REFUSED", type(e).__name__, str(e)[:200].replace("\n", " "))
def fetch(url):
    with urllib.request.urlopen(url, timeout=20) as r:
        return r.status
def direct(host, port):
    socket.create_connection((host, port), timeout=2).close()
    return "connected"
INDEX, SECRET = %d, %d
# Around the proxy: the sandbox's own loopback, any other address.
attempt("direct-loopback-index", lambda: direct("127.0.0.1", INDEX))
attempt("direct-loopback-secret", lambda: direct("127.0.0.1", SECRET))
attempt("direct-remote", lambda: direct("10.255.255.1", 80))
attempt("direct-v6", lambda: direct("::1", SECRET))
# Through the proxy, to names that resolve to forbidden addresses.
for name in ("loop", "meta", "ten", "mapped", "six"):
    attempt("dns-" + name, lambda: fetch("http://%%s.test:%%d/" %% (name, SECRET)))
# Other spellings of loopback, and another port of the allowed host.
for url in ("http://127.0.0.1:%%d/" %% INDEX, "http://[::1]:%%d/" %% INDEX, "http://[::ffff:127.0.0.1]:%%d/" %% INDEX,
            "http://[::ffff:7f00:1]:%%d/" %% INDEX, "http://2130706433:%%d/" %% INDEX, "http://localhost:%%d/" %% SECRET):
    attempt("url " + url, lambda: fetch(url))
# CONNECT to a port the chat may not use.
def tunnel(host, port):
    c = http.client.HTTPConnection("127.0.0.1", int(proxy.rsplit(":", 1)[1]), timeout=20)
    c.set_tunnel(host, port)
    c.connect()
    return "tunnel open"
attempt("connect-22", lambda: tunnel("localhost", 22))
attempt("connect-secret", lambda: tunnel("localhost", SECRET))
# A redirect from the allowed host to forbidden ones.
attempt("redirect-loopback", lambda: fetch("http://localhost:%%d/redirect?to=http://127.0.0.1:%%d/" %% (INDEX, SECRET)))
attempt("redirect-metadata", lambda: fetch("http://localhost:%%d/redirect?to=http://meta.test:%%d/latest" %% (INDEX, SECRET)))
# Slow-loris through the proxy: the head never completes.
def slow():
    s = socket.create_connection(("127.0.0.1", int(proxy.rsplit(":", 1)[1])), timeout=30)
    s.sendall(b"GET http://localhost:%%d/simple/tinypkg/ HTTP/1.1\r\n" %% INDEX)
    start = time.time()
    s.settimeout(0.2)
    got = b""
    while time.time() - start < 20:
        try:
            d = s.recv(4096)
        except socket.timeout:
            s.sendall(b"X")
            continue
        if not d:
            break
        got += d
    if got.startswith(b"HTTP/1.1 408"):
        raise Exception("cut after %%.1fs: %%s" %% (time.time() - start, got.split(b"\r\n")[0].decode()))
    return "not cut: %%r" %% got[:80]
attempt("slowloris", slow)
# The allowed host works, so the refusals above are the policy's.
print("allowed", fetch("http://localhost:%%d/simple/tinypkg/" %% INDEX))
`

func testEgressEscapes(t *testing.T, m Manager, idx *packageIndex, sec *secret) {
	id := newChat(t, m)
	code := fmt.Sprintf(egressProbe, idx.port(), sec.port())
	res := run(t, m, netReq(id, "python", code, fmt.Sprintf("localhost:%d", idx.port()), fmt.Sprintf("*.test:%d", sec.port())))
	t.Logf("sandbox says:\n%s", res.Output)
	if res.ExitCode != 0 {
		t.Fatalf("exit %d", res.ExitCode)
	}
	if strings.Contains(res.Output, "REACHED") {
		t.Error("a forbidden destination was reached")
	}
	for _, want := range []string{"dns-loop REFUSED", "dns-meta REFUSED", "dns-ten REFUSED", "dns-mapped REFUSED", "dns-six REFUSED",
		"connect-22 REFUSED", "403", "redirect-metadata REFUSED", "slowloris REFUSED Exception cut after", "allowed 200"} {
		if !strings.Contains(res.Output, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if n := sec.accepted.Load(); n != 0 {
		t.Errorf("the secret server got %d connections", n)
	}
	// The chat goes on.
	if res := run(t, m, netReq(id, "sh", "echo still here", fmt.Sprintf("localhost:%d", idx.port()))); res.ExitCode != 0 || res.Output != "still here\n" {
		t.Errorf("after the attempts: exit %d %q", res.ExitCode, res.Output)
	}
}

// testNoHosts: with an egress proxy configured, a chat that names no hosts
// still has no network at all, and nothing of the proxy is visible.
func testNoHosts(t *testing.T, m Manager, idx *packageIndex) {
	code := fmt.Sprintf(`import os, socket
print("env", sorted(k for k in os.environ if "proxy" in k.lower()))
print("mount", os.path.exists("/run/agentd"))
try:
    socket.create_connection(("127.0.0.1", %d), timeout=2)
    print("CONNECTED")
except OSError as e:
    print("refused", e)
`, idx.port())
	res := run(t, m, &chat.ExecRequest{ChatID: newChat(t, m), Language: "python", Code: code})
	if res.ExitCode != 0 || !strings.Contains(res.Output, "env []") || !strings.Contains(res.Output, "mount False") || strings.Contains(res.Output, "CONNECTED") {
		t.Errorf("a chat without hosts: exit %d:\n%s", res.ExitCode, res.Output)
	}
}

// testNetworkEndsWithRun: a process a program leaves behind loses the
// network when the run ends (its socket is gone).
func testNetworkEndsWithRun(t *testing.T, m Manager, idx *packageIndex) {
	id := newChat(t, m)
	host := fmt.Sprintf("localhost:%d", idx.port())
	code := fmt.Sprintf(`import os, subprocess, sys
subprocess.Popen([sys.executable, "-c", """
import time, urllib.request
time.sleep(3)
try:
    urllib.request.urlopen("http://%s/late", timeout=10)
    r = "REACHED"
except Exception as e:
    r = "failed: %%s" %% e
open("/work/late.txt", "w").write(r)
"""], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print("started")
`, host)
	if res := run(t, m, netReq(id, "python", code, host)); res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, res.Output)
	}
	time.Sleep(6 * time.Second) // the leftover's own schedule: 3s, then its request
	res := run(t, m, &chat.ExecRequest{ChatID: id, Language: "sh", Code: "cat late.txt 2>/dev/null || echo 'no leftover ran'"})
	t.Logf("after the run: %s", res.Output)
	if strings.Contains(res.Output, "REACHED") {
		t.Error("a process left behind reached the network after its run")
	}
	for _, p := range idx.requests() {
		if p == "/late" {
			t.Error("the index got the leftover's request")
		}
	}
}

// Runs of one chat that start at once each get the forwarder: a team's
// tools called in parallel prepared the chat's egress dir together, and
// one's rename took the other's temporary file away.
func TestEgressDirPreparedByRunsAtOnce(t *testing.T) {
	t.Parallel()
	c := &Config{Egress: nopEgress{}, EgressDir: filepath.Join(t.TempDir(), "egress")}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			if _, err := c.prepareEgress("chat-1"); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got, err := os.ReadFile(filepath.Join(c.egressDir("chat-1"), forwarderName))
	if err != nil || !bytes.Equal(got, forwarder) {
		t.Fatalf("forwarder: %v, equal %v", err, bytes.Equal(got, forwarder))
	}
	left, _ := filepath.Glob(filepath.Join(c.egressDir("chat-1"), "*.new"))
	if len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

type nopEgress struct{}

func (nopEgress) Serve(string, []string, net.Listener) (io.Closer, error) { return nil, nil }
func (nopEgress) Forget(string)                                           {}
