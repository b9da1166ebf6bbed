package e2e

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite"

	"github.com/agentd/agentd/internal/webhook"
)

// The end-to-end tests of agentd as an application backend (docs/backend.md): webhooks with a real receiver that
// verifies every signature, metadata search and changes across tenants,
// erasure down to the database rows, retention, saved teams.

// whSecret returns a whsec_ secret made of b.
func whSecret(b byte) string {
	k := make([]byte, 32)
	for i := range k {
		k[i] = b
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(k)
}

// webhookBody is the schema of a delivery's body in the contract: the
// request body of its chatEvent webhook.
const webhookBody = "#/webhooks/chatEvent/post/requestBody/content/application~1json/schema"

// hookReceiver is a webhook receiver on loopback: it checks the Standard
// Webhooks signature of every delivery with the secret of the path it
// arrives at, records it, and answers per path (200 by default).
type hookReceiver struct {
	t    *testing.T
	srv  *httptest.Server
	keys map[string][]byte // path → key

	mu      sync.Mutex
	answers map[string][]int          // path → statuses to answer in turn
	hold    map[string]chan struct{}  // path → closed when held requests may go on
	got     map[string][]hookDelivery // path → deliveries in order
	arrived map[string]chan hookDelivery
}

type hookDelivery struct {
	ID        string
	Timestamp int64
	Status    int
	Body      struct {
		ChatID string          `json:"chat_id"`
		Seq    int64           `json:"seq"`
		Event  string          `json:"event"`
		Data   json.RawMessage `json:"data"`
	}
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{t: t, keys: map[string][]byte{}, answers: map[string][]int{}, hold: map[string]chan struct{}{},
		got: map[string][]hookDelivery{}, arrived: map[string]chan hookDelivery{}}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	return h
}

// path registers a path with its secret; statuses are answered in turn.
func (h *hookReceiver) path(p, secret string, statuses ...int) string {
	key, err := webhook.ParseSecret(secret)
	if err != nil {
		h.t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.keys[p], h.answers[p], h.arrived[p] = key, statuses, make(chan hookDelivery, 100)
	return h.srv.URL + p
}

// holdFirst makes the first request to p wait until release is called.
func (h *hookReceiver) holdFirst(p string) (release func()) {
	ch := make(chan struct{})
	h.mu.Lock()
	h.hold[p] = ch
	h.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

func (h *hookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	payload, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	key := h.keys[r.URL.Path]
	arrived := h.arrived[r.URL.Path]
	h.mu.Unlock()
	var d hookDelivery
	d.ID = r.Header.Get("webhook-id")
	ts, err := strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
	d.Timestamp = ts
	if key == nil || err != nil || !webhook.Verify(key, d.ID, ts, payload, r.Header.Get("webhook-signature")) {
		h.t.Errorf("delivery to %s with a bad signature: id %q timestamp %q signature %q", r.URL.Path, d.ID,
			r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature"))
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if age := time.Since(time.Unix(ts, 0)); age > time.Minute || age < -time.Minute {
		h.t.Errorf("delivery %s timestamped %v ago", d.ID, age)
	}
	if err := json.Unmarshal(payload, &d.Body); err != nil {
		h.t.Errorf("delivery %s: body %s: %v", d.ID, payload, err)
	}
	conforms(h.t, webhookBody, payload)
	if want := d.Body.ChatID + "." + strconv.FormatInt(d.Body.Seq, 10); d.ID != want {
		h.t.Errorf("webhook-id %q, want %q", d.ID, want)
	}
	h.mu.Lock()
	hold := h.hold[r.URL.Path]
	delete(h.hold, r.URL.Path)
	d.Status = http.StatusOK
	if as := h.answers[r.URL.Path]; len(as) > 0 {
		d.Status, h.answers[r.URL.Path] = as[0], as[1:]
	}
	h.mu.Unlock()
	if hold != nil {
		arrived <- hookDelivery{ID: d.ID, Body: d.Body, Status: -1} // arrived, held
		select {
		case <-hold:
		case <-r.Context().Done():
		}
		if r.Context().Err() != nil {
			return // the sender went away
		}
	}
	h.mu.Lock()
	h.got[r.URL.Path] = append(h.got[r.URL.Path], d)
	h.mu.Unlock()
	w.WriteHeader(d.Status)
	arrived <- d
}

// next waits for the next request to a path.
func (h *hookReceiver) next(p string, within time.Duration) hookDelivery {
	h.t.Helper()
	h.mu.Lock()
	ch := h.arrived[p]
	h.mu.Unlock()
	select {
	case d := <-ch:
		return d
	case <-time.After(within):
		h.t.Fatalf("no delivery to %s within %v", p, within)
		return hookDelivery{}
	}
}

// port is the receiver's port.
func (h *hookReceiver) port() string {
	u, _ := url.Parse(h.srv.URL)
	return u.Port()
}

// withWebhook returns a spec with a webhook.
func withWebhook(t *testing.T, spec []byte, hook map[string]any) []byte {
	t.Helper()
	var m map[string]any
	mustUnmarshal(t, spec, &m)
	m["webhook"] = hook
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type deliveryView struct {
	WebhookID      string  `json:"webhook_id"`
	Seq            int64   `json:"seq"`
	URL            string  `json:"url"`
	Event          string  `json:"event"`
	Status         string  `json:"status"`
	Attempts       int     `json:"attempts"`
	LastAttemptBy  *string `json:"last_attempt_by"`
	LastStatusCode *int    `json:"last_status_code"`
}

func (p *proc) deliveries(id string) []deliveryView {
	p.t.Helper()
	code, _, body := p.do("GET", "/v1/chats/"+id+"/deliveries", nil)
	if code != http.StatusOK {
		p.t.Fatalf("deliveries of %s: %d %s", id, code, body)
	}
	conforms(p.t, "DeliveryList", body)
	var l struct {
		Deliveries []deliveryView `json:"deliveries"`
	}
	mustUnmarshal(p.t, body, &l)
	return l.Deliveries
}

// waitDelivery waits until the chat's delivery of event to url has status.
func (p *proc) waitDelivery(id, event, url, status string, within time.Duration) deliveryView {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for {
		var last []deliveryView
		for _, d := range p.deliveries(id) {
			if d.Event == event && d.URL == url && d.Status == status {
				return d
			}
			last = append(last, d)
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no %s delivery of %s to %s after %v: %+v", status, event, url, within, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestWebhooks(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, env []string) {
		rc := newHookReceiver(t)
		secret, tenantSecret := whSecret(1), whSecret(2)
		done := rc.path("/done", secret)
		flaky := rc.path("/flaky", secret, 500, 500)
		tenant := rc.path("/tenant", tenantSecret)
		file := filepath.Join(t.TempDir(), "webhooks.json")
		if err := os.WriteFile(file, []byte(fmt.Sprintf(`[{"tenant": "default", "url": %q, "events": ["chat.created"], "secret": %q}]`, tenant, tenantSecret)), 0o600); err != nil {
			t.Fatal(err)
		}
		p := startAgentd(t, append(env, "AGENTD_SANDBOX=none", "AGENTD_WEBHOOK_SECRET="+secret, "AGENTD_WEBHOOKS_FILE="+file,
			// The receiver is on loopback: the operator names its address.
			"AGENTD_TOOL_ALLOW_HOSTS=127.0.0.1:"+rc.port())...)

		// A delivery, signed, with the chat's terminal event.
		c := p.create(withWebhook(t, readExample(t, "debate.json"), map[string]any{"url": done}))
		p.waitTerminal(c.ID, 60*time.Second)
		d := p.waitDelivery(c.ID, "chat.completed", done, "delivered", 30*time.Second)
		if d.Attempts != 1 || d.LastStatusCode == nil || *d.LastStatusCode != 200 || d.WebhookID != fmt.Sprintf("%s.%d", c.ID, d.Seq) ||
			d.LastAttemptBy == nil || *d.LastAttemptBy == "" {
			t.Errorf("delivery %+v, want delivered at the first attempt with 200", d)
		}
		// The tenant endpoint of the file got chat.created, signed with its own secret.
		p.waitDelivery(c.ID, "chat.created", tenant, "delivered", 30*time.Second)

		// Retried after 500s, with the same webhook id, until delivered.
		c2 := p.create(withWebhook(t, readExample(t, "debate.json"), map[string]any{"url": flaky, "events": []string{"chat.completed"}}))
		p.waitTerminal(c2.ID, 60*time.Second)
		d2 := p.waitDelivery(c2.ID, "chat.completed", flaky, "delivered", 60*time.Second)
		if d2.Attempts != 3 || *d2.LastStatusCode != 200 {
			t.Errorf("flaky delivery %+v, want delivered at the third attempt", d2)
		}
		rc.mu.Lock()
		var ids []string
		var codes []int
		for _, x := range rc.got["/flaky"] {
			if x.Body.ChatID == c2.ID {
				ids, codes = append(ids, x.ID), append(codes, x.Status)
			}
		}
		rc.mu.Unlock()
		if len(ids) != 3 || ids[0] != d2.WebhookID || ids[1] != d2.WebhookID || ids[2] != d2.WebhookID || codes[0] != 500 || codes[2] != 200 {
			t.Errorf("flaky endpoint saw ids %v answered %v; want the same id three times, 500, 500, 200", ids, codes)
		}

		// An address outside the allow-list is refused at create, as a tool's is.
		for _, bad := range []string{"http://127.0.0.1:1/hook", "http://10.1.2.3/hook", "https://example.com/hook", "ftp://127.0.0.1:" + rc.port() + "/"} {
			code, _, body := p.do("POST", "/v1/chats", withWebhook(t, readExample(t, "debate.json"), map[string]any{"url": bad}))
			if code != http.StatusUnprocessableEntity || !strings.Contains(string(body), `"/webhook/url"`) {
				t.Errorf("webhook %s: %d %s; want 422 at /webhook/url", bad, code, body)
			}
		}
		code, _, body := p.do("POST", "/v1/chats", withWebhook(t, readExample(t, "debate.json"), map[string]any{"url": done, "events": []string{"chat.exploded"}}))
		if code != http.StatusUnprocessableEntity || !strings.Contains(string(body), `"/webhook/events/0"`) {
			t.Errorf("unknown webhook event: %d %s", code, body)
		}
		metrics := p.metricsText()
		if !strings.Contains(metrics, `agentd_webhook_attempts_total{outcome="retry"} 2`) {
			t.Errorf("metrics do not count the two retries:\n%s", grepLines([]byte(metrics), "agentd_webhook"))
		}
	})
}

// TestWebhookSurvivesKill9 kills the process during a delivery: the
// delivery still arrives, from the restarted process, with the same id.
func TestWebhookSurvivesKill9(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, env []string) {
		rc := newHookReceiver(t)
		secret := whSecret(3)
		slow := rc.path("/slow", secret)
		release := rc.holdFirst("/slow")
		defer release()
		env = append(env, "AGENTD_SANDBOX=none", "AGENTD_WEBHOOK_SECRET="+secret, "AGENTD_TOOL_ALLOW_HOSTS=127.0.0.1:"+rc.port(),
			"AGENTD_WEBHOOK_TIMEOUT=2s")
		p := startAgentd(t, env...)
		c := p.create(withWebhook(t, readExample(t, "debate.json"), map[string]any{"url": slow, "events": []string{"chat.completed"}}))
		first := rc.next("/slow", 60*time.Second)
		if first.Status != -1 {
			t.Fatalf("the first delivery was not held: %+v", first)
		}
		p.kill9() // in the middle of the delivery: its request is open
		p2 := startAgentd(t, env...)
		again := rc.next("/slow", 60*time.Second)
		if again.ID != first.ID || again.Body.ChatID != c.ID || again.Body.Event != "chat.completed" {
			t.Errorf("after kill -9 the delivery came as %+v, want the same webhook id %s", again, first.ID)
		}
		d := p2.waitDelivery(c.ID, "chat.completed", slow, "delivered", 30*time.Second)
		if d.Attempts != 2 || d.LastAttemptBy == nil || *d.LastAttemptBy == "" {
			t.Errorf("delivery %+v, want delivered at the second attempt, by the second process", d)
		}
	})
}

// metricsText returns the server's /metrics.
func (p *proc) metricsText() string {
	p.t.Helper()
	code, _, body := p.do("GET", "/metrics", nil)
	if code != http.StatusOK {
		p.t.Fatalf("metrics: %d", code)
	}
	return string(body)
}

// tenantClient is a proc acting with one tenant's key.
func tenantClient(p *proc, t *testing.T, key string) *proc {
	q := *p
	q.t, q.auth = t, "Bearer "+key
	return &q
}

func (p *proc) listIDs(query string) []string {
	p.t.Helper()
	code, _, body := p.do("GET", "/v1/chats?"+query, nil)
	if code != http.StatusOK {
		p.t.Fatalf("list %s: %d %s", query, code, body)
	}
	conforms(p.t, "ChatList", body)
	var l struct {
		Chats []chatView `json:"chats"`
	}
	mustUnmarshal(p.t, body, &l)
	ids := []string{}
	for _, c := range l.Chats {
		ids = append(ids, c.ID)
	}
	return ids
}

func TestMetadataSearchAndPatchAcrossTenants(t *testing.T) {
	t.Parallel()
	const keyA, keyB = "acme-key-0123456789abcdef", "globex-key-0123456789abcdef"
	backends(t, func(t *testing.T, env []string) {
		p := startAgentd(t, append(env, "AGENTD_SANDBOX=none", "AGENTD_API_KEYS="+keyA+":acme,"+keyB+":globex")...)
		a, b := tenantClient(p, t, keyA), tenantClient(p, t, keyB)
		spec := func(meta string) []byte {
			var m map[string]any
			mustUnmarshal(t, readExample(t, "manual-selection.json"), &m)
			m["metadata"] = json.RawMessage(meta)
			out, _ := json.Marshal(m)
			return out
		}
		a1 := a.create(spec(`{"user": "u-1", "plan": "pro"}`))
		a2 := a.create(spec(`{"user": "u-2", "plan": "pro"}`))
		b1 := b.create(spec(`{"user": "u-1", "plan": "pro"}`))
		eq := func(what string, got []string, want ...string) {
			t.Helper()
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("%s = %v, want %v", what, got, want)
			}
		}
		eq("acme user=u-1", a.listIDs("metadata.user=u-1"), a1.ID)
		eq("globex user=u-1", b.listIDs("metadata.user=u-1"), b1.ID)
		eq("acme plan=pro", a.listIDs("metadata.plan=pro"), a2.ID, a1.ID)
		eq("acme plan=pro&user=u-2", a.listIDs("metadata.plan=pro&metadata.user=u-2"), a2.ID)
		eq("acme plan=pro, one per page", a.listIDs("metadata.plan=pro&limit=1"), a2.ID)

		// PATCH merges, null removes; another tenant's chat is a 404.
		code, _, body := a.do("PATCH", "/v1/chats/"+a1.ID, []byte(`{"metadata": {"state": "escalated", "plan": null}}`))
		if code != http.StatusOK {
			t.Fatalf("patch: %d %s", code, body)
		}
		conforms(t, "Chat", body)
		var patched chatView
		mustUnmarshal(t, body, &patched)
		var meta map[string]any
		mustUnmarshal(t, patched.Metadata, &meta)
		if meta["state"] != "escalated" || meta["user"] != "u-1" || meta["plan"] != nil {
			t.Errorf("metadata after patch = %s", patched.Metadata)
		}
		eq("acme state=escalated", a.listIDs("metadata.state=escalated"), a1.ID)
		eq("acme plan=pro after patch", a.listIDs("metadata.plan=pro"), a2.ID)
		if code, _, body := b.do("PATCH", "/v1/chats/"+a1.ID, []byte(`{"metadata": {"state": "stolen"}}`)); code != http.StatusNotFound {
			t.Errorf("patch of another tenant's chat: %d %s", code, body)
		}
		eq("globex state=escalated", b.listIDs("metadata.state=escalated"))
		eq("globex state=stolen", b.listIDs("metadata.state=stolen"))
		eq("acme state=stolen", a.listIDs("metadata.state=stolen"))
		if code, _, body := a.do("PATCH", "/v1/chats/"+a1.ID, []byte(`{"metadata": {"big": "`+strings.Repeat("x", 20000)+`"}}`)); code != http.StatusUnprocessableEntity {
			t.Errorf("patch past the metadata limit: %d %s", code, body)
		}
		if code, _, body := a.do("PATCH", "/v1/chats/"+a1.ID, []byte(`{"metadata": {"a": 1}, "status": "completed"}`)); code != http.StatusBadRequest {
			t.Errorf("patch of another field: %d %s", code, body)
		}
		// Filters on name and creation time, and a bad one.
		eq("acme by name", a.listIDs("name=manual-selection&metadata.user=u-2"), a2.ID)
		eq("acme created after a2", a.listIDs("created_after="+url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339))))
		if code, _, body := a.do("GET", "/v1/chats?created_after=yesterday", nil); code != http.StatusBadRequest || !strings.Contains(string(body), "created_after") {
			t.Errorf("bad created_after: %d %s", code, body)
		}
	})
}

// dbRows counts, in the database behind env, the rows that name a chat, per
// table, and tells whether a direct DELETE of events is refused.
func dbRows(t *testing.T, env []string, chatID string) (rows map[string]int, deleteRefused bool) {
	t.Helper()
	rows = map[string]int{}
	for _, kv := range env {
		if u, ok := strings.CutPrefix(kv, "AGENTD_DATABASE_URL="); ok {
			conn, err := pgx.Connect(t.Context(), u)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			for _, tc := range [][2]string{{"events", "chat_id"}, {"chats", "id"}, {"chat_state", "id"}, {"webhook_deliveries", "chat_id"},
				{"messages", "chat_id"}, {"chat_tombstones", "id"}} {
				var n int
				if err := conn.QueryRow(t.Context(), fmt.Sprintf("SELECT count(*) FROM %s WHERE %s = $1", tc[0], tc[1]), chatID).Scan(&n); err != nil {
					t.Fatalf("count %s: %v", tc[0], err)
				}
				rows[tc[0]] = n
			}
			_, err = conn.Exec(t.Context(), "DELETE FROM events")
			return rows, err != nil
		}
		if dir, ok := strings.CutPrefix(kv, "AGENTD_DATA_DIR="); ok {
			db, err := sql.Open("sqlite", filepath.Join(dir, "agentd.db")+"?_pragma=busy_timeout(10000)")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for _, tc := range [][2]string{{"events", "chat_id"}, {"chats", "id"}, {"webhook_deliveries", "chat_id"},
				{"messages", "chat_id"}, {"chat_tombstones", "id"}} {
				var n int
				if err := db.QueryRowContext(t.Context(), fmt.Sprintf("SELECT count(*) FROM %s WHERE %s = ?", tc[0], tc[1]), chatID).Scan(&n); err != nil {
					t.Fatalf("count %s: %v", tc[0], err)
				}
				rows[tc[0]] = n
			}
			_, err = db.ExecContext(t.Context(), "DELETE FROM events")
			return rows, err != nil
		}
	}
	t.Fatal("no database in the environment")
	return nil, false
}

func TestEraseChat(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, env []string) {
		rc := newHookReceiver(t)
		secret := whSecret(5)
		hook := rc.path("/erase", secret)
		env = append(env, "AGENTD_SANDBOX=none", "AGENTD_WEBHOOK_SECRET="+secret, "AGENTD_TOOL_ALLOW_HOSTS=127.0.0.1:"+rc.port())
		p := startAgentd(t, env...)
		waiting := p.create(readExample(t, "manual-selection.json"))
		spec := withWebhook(t, readExample(t, "debate.json"), map[string]any{"url": hook, "events": []string{"chat.created", "chat.completed"}})
		c := p.create(spec)
		keep := p.create(readExample(t, "debate.json"))
		p.waitTerminal(c.ID, 60*time.Second)
		p.waitTerminal(keep.ID, 60*time.Second)
		p.waitDelivery(c.ID, "chat.completed", hook, "delivered", 30*time.Second)

		// A chat that has not ended is not erased.
		for range 50 {
			if p.get(waiting.ID).Status == "awaiting_input" {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		code, _, body := p.do("DELETE", "/v1/chats/"+waiting.ID, nil)
		if code != http.StatusConflict || !strings.Contains(string(body), "chat-not-ended") {
			t.Errorf("erase of a waiting chat: %d %s", code, body)
		}
		conforms(t, "Problem", body)

		before, _ := dbRows(t, env, c.ID)
		if before["events"] == 0 || before["chats"] == 0 || before["webhook_deliveries"] != 2 {
			t.Fatalf("rows before erasure: %v", before)
		}
		if code, _, body := p.do("DELETE", "/v1/chats/"+c.ID, nil); code != http.StatusNoContent {
			t.Fatalf("erase: %d %s", code, body)
		}
		for _, path := range []string{"", "/messages", "/events", "/deliveries", "/team"} {
			if code, _, body := p.do("GET", "/v1/chats/"+c.ID+path, nil); code != http.StatusNotFound {
				t.Errorf("GET %s of an erased chat: %d %s", path, code, body)
			}
		}
		if code, _, _ := p.do("DELETE", "/v1/chats/"+c.ID, nil); code != http.StatusNotFound {
			t.Errorf("second erase: %d, want 404", code)
		}
		if code, _, _ := p.do("PATCH", "/v1/chats/"+c.ID, []byte(`{"metadata": {"a": 1}}`)); code != http.StatusNotFound {
			t.Errorf("patch of an erased chat: %d, want 404", code)
		}
		for _, id := range p.listIDs("limit=100") {
			if id == c.ID {
				t.Error("the erased chat is still listed")
			}
		}
		after, refused := dbRows(t, env, c.ID)
		for table, n := range after {
			want := 0
			if table == "chat_tombstones" {
				want = 1
			}
			if n != want {
				t.Errorf("%d rows of the erased chat in %s, want %d", n, table, want)
			}
		}
		if !refused {
			t.Error("a direct DELETE FROM events succeeded: the log must stay append-only")
		}
		if got := len(p.messages(keep.ID)); got == 0 {
			t.Error("the other chat lost its messages")
		}
		if !strings.Contains(p.metricsText(), `agentd_chats_erased_total{cause="request"} 1`) {
			t.Error("the erasure is not counted")
		}
	})
}

func TestRetentionErasesEndedChatsOnly(t *testing.T) {
	t.Parallel()
	backends(t, func(t *testing.T, env []string) {
		p := startAgentd(t, append(env, "AGENTD_SANDBOX=none", "AGENTD_RETENTION=2s")...)
		waiting := p.create(readExample(t, "manual-selection.json"))
		ended := p.create(readExample(t, "debate.json"))
		p.waitTerminal(ended.ID, 60*time.Second)
		deadline := time.Now().Add(60 * time.Second)
		for {
			code, _, _ := p.do("GET", "/v1/chats/"+ended.ID, nil)
			if code == http.StatusNotFound {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the ended chat is still there a minute after a 2s retention")
			}
			time.Sleep(200 * time.Millisecond)
		}
		// The chat waiting for input has not ended: it stays, however old.
		time.Sleep(3 * time.Second)
		if c := p.get(waiting.ID); c.Status != "awaiting_input" {
			t.Errorf("the waiting chat is %s", c.Status)
		}
		rows, _ := dbRows(t, env, ended.ID)
		if rows["events"] != 0 || rows["chats"] != 0 || rows["chat_tombstones"] != 1 {
			t.Errorf("rows of the expired chat: %v", rows)
		}
		if !strings.Contains(p.metricsText(), `agentd_chats_erased_total{cause="retention"} 1`) {
			t.Error("the retention's erasure is not counted")
		}
	})
}

type teamView struct {
	Name    string          `json:"name"`
	Version int             `json:"version"`
	Spec    json.RawMessage `json:"spec"`
}

func TestSavedTeams(t *testing.T) {
	t.Parallel()
	const keyA, keyB = "acme-key-0123456789abcdef", "globex-key-0123456789abcdef"
	backends(t, func(t *testing.T, env []string) {
		p := startAgentd(t, append(env, "AGENTD_SANDBOX=none", "AGENTD_API_KEYS="+keyA+":acme,"+keyB+":globex")...)
		a, b := tenantClient(p, t, keyA), tenantClient(p, t, keyB)
		// The debate example without its task is a team.
		var debate map[string]json.RawMessage
		mustUnmarshal(t, readExample(t, "debate.json"), &debate)
		delete(debate, "task")
		v1Body, _ := json.Marshal(debate)
		debate["max_round"] = json.RawMessage(`4`)
		debate["metadata"] = json.RawMessage(`{"team": "v2"}`)
		v2Body, _ := json.Marshal(debate)

		put := func(c *proc, name string, body []byte, want int) teamView {
			t.Helper()
			code, hdr, resp := c.do("PUT", "/v1/teams/"+name, body)
			if code != want {
				t.Fatalf("PUT %s: %d %s, want %d", name, code, resp, want)
			}
			var tv teamView
			if code < 300 {
				conforms(t, "Team", resp)
				mustUnmarshal(t, resp, &tv)
				if code == http.StatusCreated && hdr.Get("Location") != fmt.Sprintf("/v1/teams/%s/versions/%d", name, tv.Version) {
					t.Errorf("Location %q", hdr.Get("Location"))
				}
			}
			return tv
		}
		if v := put(a, "debate", v1Body, http.StatusCreated); v.Version != 1 {
			t.Errorf("first version %d", v.Version)
		}
		if v := put(a, "debate", v1Body, http.StatusOK); v.Version != 1 {
			t.Errorf("the same spec again made version %d", v.Version)
		}
		if v := put(a, "debate", v2Body, http.StatusCreated); v.Version != 2 {
			t.Errorf("second version %d", v.Version)
		}
		put(a, "debate", readExample(t, "debate.json"), http.StatusUnprocessableEntity) // has a task
		put(a, "bad@name", v1Body, http.StatusUnprocessableEntity)
		agentchat := put(a, "agentchat", readExample(t, "agentchat-team.json"), http.StatusCreated)
		if !strings.Contains(string(agentchat.Spec), `"agents"`) {
			t.Errorf("the AgentChat component's team has no agents: %s", agentchat.Spec)
		}

		get := func(c *proc, path string, want int) teamView {
			t.Helper()
			code, _, resp := c.do("GET", path, nil)
			if code != want {
				t.Fatalf("GET %s: %d %s", path, code, resp)
			}
			var tv teamView
			if code == http.StatusOK {
				conforms(t, "Team", resp)
				mustUnmarshal(t, resp, &tv)
			}
			return tv
		}
		if v := get(a, "/v1/teams/debate", http.StatusOK); v.Version != 2 {
			t.Errorf("latest = %d", v.Version)
		}
		if v := get(a, "/v1/teams/debate/versions/1", http.StatusOK); v.Version != 1 || strings.Contains(string(v.Spec), "max_round\":4") {
			t.Errorf("version 1 = %+v", v)
		}
		get(a, "/v1/teams/debate/versions/3", http.StatusNotFound)
		code, _, resp := a.do("GET", "/v1/teams", nil)
		conforms(t, "TeamList", resp)
		if code != http.StatusOK || !strings.Contains(string(resp), `"name":"agentchat","version":1`) || !strings.Contains(string(resp), `"name":"debate","version":2`) {
			t.Errorf("team list: %d %s", code, resp)
		}

		// Chats from the team: the latest, a version, overrides.
		created := func(c *proc, body string, want int) (chatView, []byte) {
			t.Helper()
			code, _, resp := c.do("POST", "/v1/chats?include=spec", []byte(body))
			if code != want {
				t.Fatalf("create %s: %d %s", body, code, resp)
			}
			var cv chatView
			if code == http.StatusCreated {
				conforms(t, "Chat", resp)
				mustUnmarshal(t, resp, &cv)
			}
			return cv, resp
		}
		teamOf := func(resp []byte) string {
			var v struct {
				Team *struct {
					Name    string `json:"name"`
					Version int    `json:"version"`
				} `json:"team"`
			}
			mustUnmarshal(t, resp, &v)
			if v.Team == nil {
				return "none"
			}
			return fmt.Sprintf("%s@%d", v.Team.Name, v.Team.Version)
		}
		latest, resp := created(a, `{"team_ref": "debate", "task": "Tabs or spaces?"}`, http.StatusCreated)
		if got := teamOf(resp); got != "debate@2" {
			t.Errorf("team_ref debate recorded %s, want debate@2", got)
		}
		if !strings.Contains(string(resp), `"max_round":4`) || !strings.Contains(string(resp), `"task":"Tabs or spaces?"`) {
			t.Errorf("the chat's spec is not version 2's with the task: %s", resp)
		}
		pinned, resp := created(a, `{"team_ref": "debate@1", "task": "Tabs?", "name": "pinned", "metadata": {"ticket": "T-9"}, "max_round": 6}`, http.StatusCreated)
		if got := teamOf(resp); got != "debate@1" {
			t.Errorf("team_ref debate@1 recorded %s", got)
		}
		if !strings.Contains(string(resp), `"name":"pinned"`) || !strings.Contains(string(resp), `"ticket":"T-9"`) || !strings.Contains(string(resp), `"max_round":6`) {
			t.Errorf("overrides missing: %s", resp)
		}
		if c := a.waitTerminal(latest.ID, 60*time.Second); c.Status != "completed" {
			t.Errorf("chat from the team ended %s", c.Status)
		}
		a.waitTerminal(pinned.ID, 60*time.Second)
		if got := a.listIDs("team=debate"); len(got) != 2 {
			t.Errorf("chats of team debate: %v", got)
		}
		_, resp = created(a, `{"team_ref": "debate", "task": "x", "agents": []}`, http.StatusUnprocessableEntity)
		if !strings.Contains(string(resp), `"/agents"`) {
			t.Errorf("a team_ref with agents: %s", resp)
		}
		_, resp = created(a, `{"team_ref": "nope", "task": "x"}`, http.StatusUnprocessableEntity)
		if !strings.Contains(string(resp), `"/team_ref"`) {
			t.Errorf("an unknown team: %s", resp)
		}
		created(a, `{"team_ref": "debate@9", "task": "x"}`, http.StatusUnprocessableEntity)
		created(a, `{"team_ref": "debate@0", "task": "x"}`, http.StatusUnprocessableEntity)

		// Another tenant sees nothing of it.
		code, _, resp = b.do("GET", "/v1/teams", nil)
		if code != http.StatusOK || !strings.Contains(string(resp), `"teams":[]`) {
			t.Errorf("globex's team list: %d %s", code, resp)
		}
		get(b, "/v1/teams/debate", http.StatusNotFound)
		get(b, "/v1/teams/debate/versions/1", http.StatusNotFound)
		created(b, `{"team_ref": "debate", "task": "x"}`, http.StatusUnprocessableEntity)
		if v := put(b, "debate", v2Body, http.StatusCreated); v.Version != 1 {
			t.Errorf("globex's own debate team is version %d, want 1", v.Version)
		}
		if got := b.listIDs("team=debate"); len(got) != 0 {
			t.Errorf("globex lists acme's chats of the team: %v", got)
		}
	})
}
