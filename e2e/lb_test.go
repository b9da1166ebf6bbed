package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/r3labs/sse/v2"
	"gopkg.in/cenkalti/backoff.v1"

	"github.com/agentd/agentd/internal/store/pgtest"
)

// lbConfig is the part of deploy/compose/haproxy/haproxy.cfg that matters
// here, with quick health checks: GET /readyz, long timeouts for streams,
// and MCP sessions kept on their replica (docs/mcp.md).
const lbConfig = `global
  log stdout format raw local0 info
defaults
  mode http
  log global
  option httplog
  timeout connect 2s
  timeout http-request 10s
  timeout client 1h
  timeout server 1h
  retries 3
  option redispatch 1
  retry-on conn-failure empty-response response-timeout 503
frontend http
  bind 127.0.0.1:%d
  default_backend agentd
backend agentd
  balance roundrobin
  http-request disable-l7-retry if METH_POST !{ req.hdr(idempotency-key) -m found }
  option httpchk
  http-check send meth GET uri /readyz
  http-check expect status 200
  default-server check inter 300ms fall 1 rise 1
  # An MCP session lives on the replica that opened it.
  stick-table type string len 64 size 10k expire 1h
  stick match req.hdr(mcp-session-id)
  stick store-response res.hdr(mcp-session-id)
  server a %s
  server b %s
`

// startLB runs haproxy in front of the replicas and returns its base URL.
func startLB(t *testing.T, replicas ...*proc) string {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("haproxy is not installed (CI=true: a failure, not a skip)")
		}
		t.Skip("haproxy is not installed")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cfg := filepath.Join(t.TempDir(), "haproxy.cfg")
	err = os.WriteFile(cfg, fmt.Appendf(nil, lbConfig, port,
		strings.TrimPrefix(replicas[0].base, "http://"), strings.TrimPrefix(replicas[1].base, "http://")), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	startHelper(t, "haproxy", exec.Command(bin, "-db", "-f", cfg))
	lb := &proc{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", port)}
	waitFor(t, 30*time.Second, "the load balancer to see both replicas ready", func() bool {
		c, err := net.Dial("tcp", strings.TrimPrefix(lb.base, "http://"))
		if err != nil {
			return false
		}
		c.Close()
		return lbReady(lb)
	})
	return lb.base
}

func lbReady(lb *proc) bool {
	for range 4 { // round robin: every replica answers
		code, _, _ := lb.do("GET", "/readyz", nil)
		if code != 200 {
			return false
		}
	}
	return true
}

// clientResult is what one SSE client saw.
type clientResult struct {
	name       string
	ids        []int64
	types      []string
	reconnects int
	err        error
}

// followGo streams a chat with r3labs/sse, which reconnects with
// Last-Event-ID after an error but stops at a cleanly ended stream.
func followGo(ctx context.Context, url string, opened func()) clientResult {
	res := clientResult{name: "go r3labs/sse"}
	c := sse.NewClient(url, sse.ClientMaxBufferSize(2<<20)) // messages up to 1 MiB
	var once sync.Once
	c.OnConnect(func(*sse.Client) { once.Do(opened) })
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxElapsedTime = 200*time.Millisecond, time.Minute
	c.ReconnectStrategy = b
	c.ReconnectNotify = func(error, time.Duration) { res.reconnects++ }
	res.err = c.SubscribeWithContext(ctx, "", func(ev *sse.Event) {
		typ := string(ev.Event)
		if typ == "message.delta" || len(ev.Event) == 0 {
			return
		}
		id, _ := strconv.ParseInt(string(ev.ID), 10, 64)
		res.ids, res.types = append(res.ids, id), append(res.types, typ)
	})
	return res
}

// followJS streams a chat with the npm eventsource client (e2e/js).
func followJS(ctx context.Context, url string, opened func()) clientResult {
	res := clientResult{name: "js eventsource"}
	cmd := exec.CommandContext(ctx, "node", "js/follow.mjs", url)
	out, err := cmd.StdoutPipe()
	if err != nil {
		res.err = err
		return res
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		res.err = err
		return res
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var line struct {
			ID    int64  `json:"id"`
			Type  string `json:"type"`
			Open  int    `json:"open"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			res.err = fmt.Errorf("%q: %w", sc.Text(), err)
			continue
		}
		switch {
		case line.Open == 1:
			opened()
		case line.Open > 1:
			res.reconnects++
		case line.Type != "":
			res.ids, res.types = append(res.ids, line.ID), append(res.types, line.Type)
		}
	}
	if err := cmd.Wait(); err != nil && res.err == nil {
		res.err = fmt.Errorf("node: %v\n%s", err, stderr.String())
	}
	return res
}

// needJS fails (CI) or skips without node and the e2e/js packages (the
// eventsource client, and the packages named).
func needJS(t *testing.T, packages ...string) {
	t.Helper()
	_, errNode := exec.LookPath("node")
	var errMod error
	for _, pkg := range append([]string{"eventsource"}, packages...) {
		if _, err := os.Stat("js/node_modules/" + pkg); err != nil {
			errMod = err
		}
	}
	if errNode == nil && errMod == nil {
		return
	}
	msg := "node and e2e/js/node_modules (npm ci --prefix e2e/js) are needed for the JavaScript clients"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true: a failure, not a skip)")
	}
	t.Skip(msg)
}

// TestSIGTERMBehindLoadBalancerLosesNoEvent runs two replicas behind
// haproxy, streams a running chat through it with Go and JavaScript SSE
// clients, and SIGTERMs one replica: /readyz turns 503 so the balancer
// stops routing to it, its streams are aborted, the clients reconnect
// through the balancer to the other replica, which also continues the
// chat, and every client ends with every event exactly once.
func TestSIGTERMBehindLoadBalancerLosesNoEvent(t *testing.T) {
	t.Parallel()
	needJS(t)
	db := pgtest.URL(t)
	env := []string{"AGENTD_DATABASE_URL=" + db, "AGENTD_SHUTDOWN_DRAIN=1500ms", "AGENTD_LEASE_TTL=2s"}
	p1 := startAgentd(t, env...)
	p2 := startAgentd(t, env...)
	base := startLB(t, p1, p2)
	lb := &proc{t: t, base: base}

	// Long enough (90 s) to outlast six clients starting on a loaded
	// machine (a node process can take seconds to start).
	const rounds = 90
	c := lb.create(slowSpec(rounds, 1000))
	url := base + "/v1/chats/" + c.ID + "/events"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Six streams, each opened once the one before is: the balancer's round
	// robin alternates them between the replicas, and in this order each
	// client kind has a stream on both, whichever replica comes first.
	kinds := []string{"go", "js", "js", "go", "go", "js"}
	results := make(chan clientResult, len(kinds))
	var wg sync.WaitGroup
	for _, kind := range kinds {
		opened := make(chan struct{})
		open := sync.OnceFunc(func() { close(opened) })
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer open()
			if kind == "go" {
				results <- followGo(ctx, url, open)
			} else {
				results <- followJS(ctx, url, open)
			}
		}()
		<-opened
	}
	if v := p2.get(c.ID); v.Status != "running" {
		t.Fatalf("the chat is %s before the SIGTERM: the machine is too slow for this test", v.Status)
	}
	if err := p1.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(results)
	final := p2.waitTerminal(c.ID, 120*time.Second)
	if final.Status != "completed" {
		t.Fatalf("chat after SIGTERM: %+v", final)
	}
	reconnects := map[string]int{}
	for r := range results {
		reconnects[r.name] += r.reconnects
		if r.err != nil {
			t.Errorf("%s: %v", r.name, r.err)
		}
		for i, id := range r.ids {
			if id != int64(i+1) {
				t.Errorf("%s: event %d has id %d: ids %v", r.name, i, id, r.ids)
				break
			}
		}
		if len(r.ids) != int(final.LastSeq) || r.types[len(r.types)-1] != "chat.completed" {
			t.Errorf("%s: %d events ending %v, want %d ending chat.completed", r.name, len(r.ids), r.types[max(0, len(r.types)-2):], final.LastSeq)
		}
		t.Logf("%s: %d events, %d reconnects", r.name, len(r.ids), r.reconnects)
	}
	for _, name := range []string{"go r3labs/sse", "js eventsource"} {
		if reconnects[name] == 0 {
			t.Errorf("no %s client reconnected: the SIGTERMed replica served none of its streams, so the test proved nothing for it", name)
		}
	}
	<-p1.exited
	if p1.waitErr != nil {
		t.Errorf("replica exited with %v after SIGTERM", p1.waitErr)
	}
}
