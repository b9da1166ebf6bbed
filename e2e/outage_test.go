package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/store/pgtest"
)

// TestDatabaseOutageUnderARunningChat stops the chat's Postgres (a server of
// the test's own) while the chat runs and a client streams it: readiness
// turns 503, the API answers 503 with Retry-After and names no part of the
// database, /metrics keeps answering with agentd_store_up 0; when Postgres
// is back the chat completes with every message once, and the stream that
// stayed open has every event once, in order.
func TestDatabaseOutageUnderARunningChat(t *testing.T) {
	t.Parallel()
	pg := pgtest.NewServer(t)
	p := startAgentd(t, "AGENTD_DATABASE_URL="+pg.URL())
	const rounds = 8
	c := p.create(slowSpec(rounds, 400))
	events, stop := p.stream(c.ID, 0)
	defer stop()
	streamed := make(chan []sseEvent, 1)
	go func() { streamed <- collect(t, events, 3*time.Minute) }()

	waitFor(t, 30*time.Second, "the chat's first turn", func() bool { return p.get(c.ID).Turns >= 1 })
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}

	waitFor(t, 30*time.Second, "/readyz 503", func() bool {
		code, _, _ := p.do("GET", "/readyz", nil)
		return code == http.StatusServiceUnavailable
	})
	port := strings.TrimSuffix(strings.TrimPrefix(pg.URL(), "postgres://postgres@127.0.0.1:"), "/postgres?sslmode=disable")
	for _, path := range []string{"/v1/chats/" + c.ID, "/v1/chats", "/v1/chats/" + c.ID + "/messages", "/readyz"} {
		code, h, body := p.do("GET", path, nil)
		if code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
			t.Errorf("GET %s during the outage: %d, Retry-After %q, %s", path, code, h.Get("Retry-After"), body)
		}
		conforms(t, "Problem", body)
		for _, secret := range []string{port, "127.0.0.1", "postgres", "dial", "connect"} {
			if strings.Contains(string(body), secret) {
				t.Errorf("GET %s during the outage names %q: %s", path, secret, body)
			}
		}
	}
	code, _, body := p.do("POST", "/v1/chats", slowSpec(2, 0))
	if code != http.StatusServiceUnavailable {
		t.Errorf("create during the outage: %d %s", code, body)
	}
	code, _, body = p.do("GET", "/metrics", nil)
	if code != http.StatusOK || !regexp.MustCompile(`(?m)^agentd_store_up 0$`).Match(body) {
		t.Fatalf("/metrics during the outage: %d\n%s", code, grepLines(body, "agentd_store_up"))
	}
	// The worker has tried to append and waits; it did not fail the chat.
	waitFor(t, 30*time.Second, "an append to wait for the store", func() bool {
		_, _, body := p.do("GET", "/metrics", nil)
		return regexp.MustCompile(`(?m)^agentd_append_errors_total\{reason="unavailable"\} [1-9]`).Match(body)
	})

	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "/readyz 200", func() bool {
		code, _, _ := p.do("GET", "/readyz", nil)
		return code == http.StatusOK
	})
	_, _, body = p.do("GET", "/metrics", nil)
	if !regexp.MustCompile(`(?m)^agentd_store_up 1$`).Match(body) {
		t.Errorf("/metrics after the outage: %s", grepLines(body, "agentd_store_up"))
	}
	view := p.waitTerminal(c.ID, 90*time.Second)
	if view.Status != "completed" || view.StopReason == nil || *view.StopReason != "max_round" {
		t.Fatalf("chat after the outage: %+v", view)
	}
	var got []string
	for _, m := range p.messages(c.ID) {
		got = append(got, m.Content)
	}
	if want := expectedContents(rounds); !slices.Equal(got, want) {
		t.Fatalf("messages after the outage = %v, want %v", got, want)
	}
	all := <-streamed
	for i, e := range all {
		if e.ID != int64(i+1) {
			t.Fatalf("stream across the outage: event %d has id %d (ids %v)", i, e.ID, ids(all))
		}
	}
	if len(all) == 0 || all[len(all)-1].Type != "chat.completed" || all[len(all)-1].ID != view.LastSeq {
		t.Fatalf("stream across the outage ended with %v, last_seq %d", types(all), view.LastSeq)
	}
}

// TestUnreachableDatabaseAtStartIsRetriedThenReported: agentd retries an
// unreachable database for AGENTD_DATABASE_WAIT, then exits with a message
// that says so.
func TestUnreachableDatabaseAtStartIsRetriedThenReported(t *testing.T) {
	t.Parallel()
	pg := pgtest.NewServer(t)
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binPath)
	cmd.Env = append(os.Environ(), "AGENTD_ADDR=127.0.0.1:0", "AGENTD_DATABASE_URL="+pg.URL(), "AGENTD_DATABASE_WAIT=2s")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	elapsed := time.Since(start)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("agentd with an unreachable database: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "database still unreachable after 2s") || !strings.Contains(string(out), "database unreachable; retrying") {
		t.Fatalf("no clear message:\n%s", out)
	}
	if elapsed < 2*time.Second {
		t.Fatalf("gave up after %v, before the 2s wait", elapsed)
	}
}

// waitFor polls cond (each poll is a request to the server) until it holds.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func grepLines(b []byte, prefix string) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return fmt.Sprint(out, " (", strconv.Itoa(len(b)), " bytes)")
}
