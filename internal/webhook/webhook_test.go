package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/store/sqlite"
	"github.com/agentd/agentd/internal/tool"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The Standard Webhooks test vector, as the reference libraries check it.
const (
	vectorSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTime   = 1614265330
	vectorBody   = `{"test": 2432232314}`
	vectorSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSignStandardWebhooksVector(t *testing.T) {
	key, err := ParseSecret(vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	if got := Sign(key, vectorID, vectorTime, []byte(vectorBody)); got != vectorSig {
		t.Errorf("Sign = %s, want %s", got, vectorSig)
	}
	if !Verify(key, vectorID, vectorTime, []byte(vectorBody), "v1,bm9wZQ== "+vectorSig) {
		t.Error("Verify rejects the vector among several signatures")
	}
	if Verify(key, vectorID, vectorTime+1, []byte(vectorBody), vectorSig) {
		t.Error("Verify accepts a signature of another timestamp")
	}
	// The test receiver checks deliveries with an HMAC of its own: it
	// gives the vector as well.
	if got := newReceiver(t, vectorSecret).sign(vectorID, strconv.Itoa(vectorTime), []byte(vectorBody)); got != vectorSig {
		t.Errorf("the receiver's signature = %s, want %s", got, vectorSig)
	}
}

func TestParseSecret(t *testing.T) {
	for _, bad := range []string{"", "secret", "whsec_", "whsec_!!!", "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 8))} {
		if _, err := ParseSecret(bad); err == nil {
			t.Errorf("ParseSecret(%q) succeeded", bad)
		}
	}
}

// newSecret returns a valid whsec_ secret.
func newSecret(b byte) string {
	k := make([]byte, 32)
	for i := range k {
		k[i] = b
	}
	return secretPrefix + base64.StdEncoding.EncodeToString(k)
}

// guard is the tools' address guard, as the server has it.
func guard(t *testing.T, allowPrivate bool, hosts ...string) *tool.Runner {
	t.Helper()
	r, err := tool.New(tool.Config{AllowPrivate: allowPrivate, HTTPAllowHosts: hosts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestRoute(t *testing.T) {
	r, err := NewRouter(RouterConfig{Secret: newSecret(1), Check: guard(t, false), Endpoints: []Endpoint{
		{Tenant: "acme", URL: "https://all.example.com/", Events: []string{"message", "chat.completed"}},
		{Tenant: "acme", URL: "https://hook.example.com/", Secret: newSecret(2)},
		{Tenant: "globex", URL: "https://globex.example.com/"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	evs := []chat.Event{{Seq: 4, Type: chat.EventMessage}, {Seq: 5, Type: chat.EventInputRequested}, {Seq: 6, Type: chat.EventChatCompleted}}
	type d struct {
		seq         int64
		url, source string
	}
	route := func(tenant string, hook *spec.Webhook) []d {
		var out []d
		for _, x := range r.Route(tenant, hook, evs) {
			if evs[x.Seq-4].Type != x.Event {
				t.Errorf("delivery %+v names the wrong event", x)
			}
			out = append(out, d{x.Seq, x.URL, x.Source})
		}
		return out
	}
	for _, tt := range []struct {
		name   string
		tenant string
		hook   *spec.Webhook
		want   []d
	}{
		{"no hook, no endpoints", "initech", nil, nil},
		{"spec hook, default events", "initech", &spec.Webhook{URL: "https://mine.example.com/"},
			[]d{{5, "https://mine.example.com/", "spec"}, {6, "https://mine.example.com/", "spec"}}},
		{"spec hook, its events", "initech", &spec.Webhook{URL: "https://mine.example.com/", Events: []string{"message"}},
			[]d{{4, "https://mine.example.com/", "spec"}}},
		{"tenant endpoints", "acme", nil, []d{{4, "https://all.example.com/", "tenant"}, {5, "https://hook.example.com/", "tenant"},
			{6, "https://all.example.com/", "tenant"}, {6, "https://hook.example.com/", "tenant"}}},
		{"spec hook on a tenant endpoint's URL: one delivery each", "acme", &spec.Webhook{URL: "https://hook.example.com/"},
			[]d{{4, "https://all.example.com/", "tenant"}, {5, "https://hook.example.com/", "spec"},
				{6, "https://hook.example.com/", "spec"}, {6, "https://all.example.com/", "tenant"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := route(tt.tenant, tt.hook); !slices.Equal(got, tt.want) {
				t.Errorf("Route = %v, want %v", got, tt.want)
			}
		})
	}
	if n := testing.AllocsPerRun(100, func() { r.Route("initech", nil, evs) }); n != 0 {
		t.Errorf("Route of a chat without webhooks allocates %v times", n)
	}
	hook := &spec.Webhook{URL: "https://mine.example.com/", Events: []string{"chat.failed"}}
	if n := testing.AllocsPerRun(100, func() { r.Route("initech", hook, evs) }); n != 0 {
		t.Errorf("Route of events no webhook wants allocates %v times", n)
	}
}

func TestCheckWebhook(t *testing.T) {
	r, err := NewRouter(RouterConfig{Secret: newSecret(1), Check: guard(t, false, "hooks.example.com")})
	if err != nil {
		t.Fatal(err)
	}
	paths := func(ps []spec.Problem) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Path)
		}
		return out
	}
	if ps := r.CheckWebhook(&spec.Webhook{URL: "https://hooks.example.com/x", Events: []string{"message", "run.started"}}); len(ps) != 0 {
		t.Errorf("a good webhook has problems: %v", ps)
	}
	ps := r.CheckWebhook(&spec.Webhook{URL: "https://elsewhere.example.com/x", Events: []string{"message", "nope", "message"}})
	if want := []string{"/url", "/events/1", "/events/2"}; !slices.Equal(paths(ps), want) {
		t.Errorf("problems at %v, want %v: %v", paths(ps), want, ps)
	}
	if ps := r.CheckWebhook(&spec.Webhook{URL: "http://127.0.0.1:9/x"}); len(ps) != 1 || !strings.Contains(ps[0].Message, "allow-list") {
		t.Errorf("a loopback URL outside the allow-list: %v", ps)
	}
	noSecret, err := NewRouter(RouterConfig{Check: guard(t, false)})
	if err != nil {
		t.Fatal(err)
	}
	if ps := noSecret.CheckWebhook(&spec.Webhook{URL: "https://hooks.example.com/x"}); len(ps) != 1 || ps[0].Path != "" {
		t.Errorf("a webhook on a server without a secret: %v", ps)
	}
	if ps := noSecret.CheckWebhook(&spec.Webhook{URL: "http://10.1.2.3/"}); len(ps) != 2 {
		t.Errorf("a private address: %v", ps)
	}
}

func TestNewRouterReportsEveryProblem(t *testing.T) {
	_, err := NewRouter(RouterConfig{Secret: "nope", Check: guard(t, false), Endpoints: []Endpoint{
		{URL: "https://a.example.com/"},
		{Tenant: "acme", URL: "http://127.0.0.1/", Events: []string{"chat.exploded"}, Secret: "bad"},
		{Tenant: "acme", URL: "http://127.0.0.1/"},
	}})
	if err == nil {
		t.Fatal("NewRouter accepted a bad configuration")
	}
	for _, want := range []string{"AGENTD_WEBHOOK_SECRET", "endpoint 0: tenant is required", "endpoint 1: url", "endpoint 1: events/0",
		"endpoint 1: secret", "endpoint 2: tenant \"acme\" has the url"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`[{"tenant": "acme", "url": "https://h.example.com/", "events": ["message"], "secret": "`+newSecret(3)+`"}]`), 0o600)
	eps, err := ReadFile(good)
	if err != nil || len(eps) != 1 || eps[0].Tenant != "acme" || eps[0].Events[0] != "message" {
		t.Errorf("ReadFile = %+v, %v", eps, err)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`[{"tenant": "acme", "uri": "https://h.example.com/"}]`), 0o600)
	if _, err := ReadFile(bad); err == nil || !strings.Contains(err.Error(), "uri") {
		t.Errorf("ReadFile of an unknown field: %v", err)
	}
}

// receiver is an httptest server that verifies every delivery's signature
// and answers with the statuses it is given in turn (then 204). It checks
// the signature with a plain HMAC of its own, not with Verify, which signs
// with Sign as the dispatcher does and would accept whatever Sign makes.
type receiver struct {
	t   *testing.T
	key []byte
	srv *httptest.Server

	mu       sync.Mutex
	statuses []int
	got      []delivered
	arrived  chan delivered
}

type delivered struct {
	id     string
	status int
	body   body
	// at is when the delivery arrived.
	at time.Time
}

func newReceiver(t *testing.T, secret string, statuses ...int) *receiver {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	rc := &receiver{t: t, key: key, statuses: statuses, arrived: make(chan delivered, 100)}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	payload, _ := io.ReadAll(r.Body)
	id, tsText := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
	ts, err := strconv.ParseInt(tsText, 10, 64)
	signed := err == nil && slices.Contains(strings.Fields(r.Header.Get("webhook-signature")), rc.sign(id, tsText, payload))
	if !signed {
		rc.t.Errorf("delivery %s with a bad signature (timestamp %q)", id, tsText)
	} else if d := time.Since(time.Unix(ts, 0)); d > time.Minute || d < -time.Minute {
		rc.t.Errorf("delivery %s timestamped %v ago", id, d)
	}
	var b body
	if err := json.Unmarshal(payload, &b); err != nil {
		rc.t.Errorf("delivery %s body %s: %v", id, payload, err)
	}
	rc.mu.Lock()
	// A delivery refused for its signature is answered 401 and handed to
	// the test all the same, which fails at once on the status.
	status := http.StatusUnauthorized
	switch {
	case !signed:
	case len(rc.statuses) > 0:
		status, rc.statuses = rc.statuses[0], rc.statuses[1:]
	default:
		status = http.StatusNoContent
	}
	d := delivered{id: id, status: status, body: b, at: at}
	rc.got = append(rc.got, d)
	rc.mu.Unlock()
	w.WriteHeader(status)
	rc.arrived <- d
}

// sign is the Standard Webhooks signature: HMAC-SHA256 of
// "id.timestamp.body" under the secret's bytes, base64, after "v1,".
func (rc *receiver) sign(id, timestamp string, payload []byte) string {
	mac := hmac.New(sha256.New, rc.key)
	mac.Write([]byte(id + "." + timestamp + "."))
	mac.Write(payload)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// next waits for the next delivery.
func (rc *receiver) next() delivered {
	rc.t.Helper()
	select {
	case d := <-rc.arrived:
		return d
	case <-time.After(30 * time.Second):
		rc.t.Fatal("no delivery within 30s")
		return delivered{}
	}
}

// dispatchFixture is a real SQLite store with a dispatcher on it.
type dispatchFixture struct {
	store  *sqlite.Store
	router *Router
	disp   *Dispatcher
	reg    *prometheus.Registry
}

func newDispatchFixture(t *testing.T, secret string, retryFor time.Duration, opts ...func(*DispatcherConfig)) *dispatchFixture {
	t.Helper()
	f := openDispatchFixture(t, secret, retryFor, opts...)
	f.start(t)
	return f
}

// openDispatchFixture is newDispatchFixture with the dispatcher not
// started.
func openDispatchFixture(t *testing.T, secret string, retryFor time.Duration, opts ...func(*DispatcherConfig)) *dispatchFixture {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "agentd.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	g := guard(t, true)
	router, err := NewRouter(RouterConfig{Secret: secret, Check: g})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	cfg := DispatcherConfig{Store: st, Router: router, Transport: g.Transport(), RetryFor: retryFor, Owner: "replica-b",
		Timeout: 5 * time.Second, Poll: 50 * time.Millisecond, FirstBackoff: 20 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), Registerer: reg}
	for _, o := range opts {
		o(&cfg)
	}
	disp, err := NewDispatcher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &dispatchFixture{store: st, router: router, disp: disp, reg: reg}
}

func (f *dispatchFixture) start(t *testing.T) {
	t.Helper()
	if err := f.disp.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.disp.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	})
}

// create makes a chat whose chat.created event goes to url.
func (f *dispatchFixture) create(t *testing.T, url string) string {
	t.Helper()
	id := uuid.NewString()
	now := time.Now()
	evs := []chat.Event{{Seq: 1, Type: chat.EventChatCreated, Data: json.RawMessage(`{"status": "queued"}`), CreatedAt: now}}
	_, _, err := f.store.CreateChat(t.Context(), &chat.CreateChatParams{ID: id, Tenant: "acme", Spec: json.RawMessage(`{}`),
		CreatedAt: now, Events: evs, Deliveries: []chat.Delivery{{Seq: 1, Event: chat.EventChatCreated, URL: url, Source: chat.DeliverySpec}}})
	if err != nil {
		t.Fatal(err)
	}
	f.router.Queued()
	return id
}

func (f *dispatchFixture) delivery(t *testing.T, id string, want chat.DeliveryStatus) chat.DeliveryRecord {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ds, err := f.store.ListDeliveries(t.Context(), &chat.ListDeliveriesParams{ChatID: id})
		if err != nil || len(ds) != 1 {
			t.Fatalf("deliveries of %s: %v, %v", id, ds, err)
		}
		if ds[0].Status == want {
			return ds[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery %+v is not %s after 30s", ds[0], want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDispatcherRetriesUntilDelivered: a delivery answered with errors is
// tried again, under the same webhook-id and signed each time, until it is
// delivered; the attempts are spaced by the backoff, which grows.
func TestDispatcherRetriesUntilDelivered(t *testing.T) {
	secret := newSecret(7)
	rc := newReceiver(t, secret, 500, 503)
	// A poll much shorter than the backoff: a retry due at once would
	// come within a poll, well before half the first backoff.
	const first = 200 * time.Millisecond
	f := newDispatchFixture(t, secret, time.Hour, func(c *DispatcherConfig) {
		c.FirstBackoff, c.Poll = first, 10*time.Millisecond
	})
	id := f.create(t, rc.srv.URL+"/hook")
	var ids []string
	var arrived []time.Time
	for _, want := range []int{500, 503, 204} {
		d := rc.next()
		if d.status != want {
			t.Fatalf("attempt answered %d, want %d", d.status, want)
		}
		ids = append(ids, d.id)
		arrived = append(arrived, d.at)
		if d.body.ChatID != id || d.body.Seq != 1 || d.body.Event != "chat.created" {
			t.Errorf("body %+v", d.body)
		}
	}
	if want := id + ".1"; ids[0] != want || ids[1] != want || ids[2] != want {
		t.Errorf("webhook ids %v, want %s on every attempt", ids, want)
	}
	// The n-th backoff is drawn from [first·2ⁿ⁻¹/2, first·2ⁿ⁻¹], and the
	// next attempt cannot come before it has passed.
	if gap := arrived[1].Sub(arrived[0]); gap < first/2 {
		t.Errorf("attempt 2 came %v after attempt 1, want at least %v (half the first backoff)", gap, first/2)
	}
	if gap := arrived[2].Sub(arrived[1]); gap < first {
		t.Errorf("attempt 3 came %v after attempt 2, want at least %v (half the second backoff)", gap, first)
	}
	d := f.delivery(t, id, chat.DeliveryDelivered)
	if d.Attempts != 3 || d.LastStatusCode != 204 || d.DeliveredAt == nil {
		t.Errorf("delivery %+v, want delivered on the third attempt", d)
	}
	if n := testutil.ToFloat64(f.disp.metrics.attempts.WithLabelValues(outcomeRetry)); n != 2 {
		t.Errorf("retry attempts counted %v, want 2", n)
	}
}

// TestDispatcherCountsWhatWasSent: a claim whose replica dies before
// sending is not counted as an attempt; the request of the replica that
// takes the delivery over is, with that replica's name.
func TestDispatcherCountsWhatWasSent(t *testing.T) {
	secret := newSecret(10)
	rc := newReceiver(t, secret)
	f := openDispatchFixture(t, secret, time.Hour)
	id := f.create(t, rc.srv.URL)
	// Replica a claims the delivery, with a lease that ends at once, and
	// dies before sending it.
	now := time.Now()
	cs, err := f.store.ClaimDeliveries(t.Context(), &chat.ClaimDeliveriesParams{Now: now, LeaseUntil: now.Add(50 * time.Millisecond), Limit: 10})
	if err != nil || len(cs) != 1 {
		t.Fatalf("claim of replica a: %+v, %v", cs, err)
	}
	f.start(t) // replica b
	if d := rc.next(); d.body.ChatID != id {
		t.Errorf("delivered %+v", d.body)
	}
	d := f.delivery(t, id, chat.DeliveryDelivered)
	if d.Sent != 1 || d.SentBy != "replica-b" || d.Attempts != 2 {
		t.Errorf("delivery %+v: want 1 request sent, by replica-b, of 2 claims", d)
	}
	rc.mu.Lock()
	if len(rc.got) != 1 {
		t.Errorf("the receiver saw %d requests, want 1", len(rc.got))
	}
	rc.mu.Unlock()
}

func TestDispatcherGivesUpAfterTheRetryWindow(t *testing.T) {
	secret := newSecret(8)
	rc := newReceiver(t, secret, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500, 500)
	f := newDispatchFixture(t, secret, 200*time.Millisecond)
	id := f.create(t, rc.srv.URL)
	d := f.delivery(t, id, chat.DeliveryFailed)
	if d.LastStatusCode != 500 || !strings.Contains(d.LastError, "retry window") {
		t.Errorf("failed delivery %+v, want the last 500 and the reason", d)
	}
}

func TestDispatcher410DisablesTheEndpoint(t *testing.T) {
	secret := newSecret(9)
	rc := newReceiver(t, secret, http.StatusGone)
	f := newDispatchFixture(t, secret, time.Hour)
	id := f.create(t, rc.srv.URL)
	d := f.delivery(t, id, chat.DeliveryFailed)
	if d.LastStatusCode != 410 || d.Attempts != 1 {
		t.Errorf("delivery after a 410 = %+v", d)
	}
	if n := testutil.ToFloat64(f.disp.metrics.attempts.WithLabelValues(outcomeDisabled)); n != 1 {
		t.Errorf("disabled attempts counted %v, want 1", n)
	}
}

func TestDispatcherStopBeforeStartAndTwice(t *testing.T) {
	st, err := sqlite.Open(t.Context(), sqlite.Config{Path: filepath.Join(t.TempDir(), "agentd.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g := guard(t, false)
	router, _ := NewRouter(RouterConfig{Check: g})
	d, err := NewDispatcher(DispatcherConfig{Store: st, Router: router, Transport: g.Transport()})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := d.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestBackoff(t *testing.T) {
	d := &Dispatcher{cfg: DispatcherConfig{FirstBackoff: time.Second, MaxBackoff: time.Minute}}
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 10: time.Minute, 100: time.Minute} {
		for range 50 {
			if b := d.backoff(n); b < want/2 || b > want {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", n, b, want/2, want)
			}
		}
	}
}
