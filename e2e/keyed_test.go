package e2e

import (
	"bytes"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/store/pgtest"
)

// postBoth sends one POST with an Idempotency-Key to two replicas at once
// and returns both answers.
func postBoth(t *testing.T, ps [2]*proc, path, key string, body []byte) (codes [2]int, bodies [2][]byte) {
	t.Helper()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, p := range ps {
		wg.Go(func() {
			<-start
			codes[i], _, bodies[i] = p.do("POST", path, body, "Idempotency-Key", key)
		})
	}
	close(start)
	wg.Wait()
	return codes, bodies
}

// TestKeyedRequestsOnTwoReplicas: the real binary, two replicas on one
// Postgres. One POST /runs with one Idempotency-Key sent to both at once
// posts one run, and both answers are the same bytes; so does a repeat
// after the run ended, and after the replica that answered was killed
// (kill -9). A fork is made once the same way. The key with another body
// is a 409 problem; an overlong key a 400.
func TestKeyedRequestsOnTwoReplicas(t *testing.T) {
	t.Parallel()
	env := []string{"AGENTD_DATABASE_URL=" + pgtest.URL(t), "AGENTD_LEASE_TTL=2s"}
	p1, p2 := startAgentd(t, env...), startAgentd(t, env...)
	ps := [2]*proc{p1, p2}
	c := p1.create([]byte(`{"task": "go", "max_round": 1, "agents": [{"name": "a", "type": "assistant",
		"model": {"provider": "replay", "responses": ["r1", "r2", "r3", "r4"]}}]}`))
	p1.waitTerminal(c.ID, 30*time.Second)

	runs := "/v1/chats/" + c.ID + "/runs"
	body := []byte(`{"task": "again", "if_busy": "enqueue"}`)
	codes, answers := postBoth(t, ps, runs, "run-2", body)
	if codes != [2]int{http.StatusAccepted, http.StatusAccepted} || !bytes.Equal(answers[0], answers[1]) {
		t.Fatalf("POST /runs with one key to both replicas:\n%d %s\n%d %s", codes[0], answers[0], codes[1], answers[1])
	}
	conforms(t, "RunPosted", answers[0])
	var posted runView
	mustUnmarshal(t, answers[0], &posted)
	if posted.PostedRun != 2 {
		t.Fatalf("posted run %d, want 2: %s", posted.PostedRun, answers[0])
	}
	ended := p2.waitRun(c.ID, 2, 30*time.Second)
	if ended.QueuedRuns != 0 {
		t.Fatalf("after run 2: %d runs queued, want none", ended.QueuedRuns)
	}
	events, stop := p2.stream(c.ID, 0)
	got := runLog(collect(t, events, 30*time.Second))
	stop()
	want := []string{"run 1", "user:go", "a:r1", "end 1: Maximum number of turns 1 reached.",
		"run 2", "user:again", "a:r2", "end 2: Maximum number of turns 1 reached."}
	if !slices.Equal(got, want) {
		t.Fatalf("log =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The chat moved on; a repeat still gets the first answer.
	for _, p := range ps {
		code, _, b := p.do("POST", runs, body, "Idempotency-Key", "run-2")
		if code != http.StatusAccepted || !bytes.Equal(b, answers[0]) {
			t.Fatalf("repeat after the run ended: %d %s\nwant %s", code, b, answers[0])
		}
	}
	code, _, b := p2.do("POST", runs, []byte(`{"task": "other", "if_busy": "enqueue"}`), "Idempotency-Key", "run-2")
	if code != http.StatusConflict || !strings.Contains(string(b), "urn:agentd:problem:conflict") {
		t.Fatalf("the key with another body: %d %s", code, b)
	}
	conforms(t, "Problem", b)
	code, _, b = p2.do("POST", runs, body, "Idempotency-Key", strings.Repeat("k", 256))
	if code != http.StatusBadRequest || !strings.Contains(string(b), "Idempotency-Key") {
		t.Fatalf("a 256-character key: %d %s", code, b)
	}
	if v := p1.getRun(c.ID); v.Run != 2 || v.QueuedRuns != 0 {
		t.Fatalf("after the repeats: run %d, %d queued; want run 2 and none", v.Run, v.QueuedRuns)
	}

	// A fork with a run, keyed: made once, answered running at its run.
	fork := "/v1/chats/" + c.ID + "/fork"
	fbody := []byte(`{"run": {"task": "forked"}}`)
	codes, forks := postBoth(t, ps, fork, "fork-1", fbody)
	if codes != [2]int{http.StatusCreated, http.StatusCreated} || !bytes.Equal(forks[0], forks[1]) {
		t.Fatalf("POST /fork with one key to both replicas:\n%d %s\n%d %s", codes[0], forks[0], codes[1], forks[1])
	}
	conforms(t, "Chat", forks[0])
	var f runView
	mustUnmarshal(t, forks[0], &f)
	if f.Status != "running" || f.Run != 3 || f.QueuedRuns != 0 {
		t.Fatalf("the fork's answer: %s", forks[0])
	}
	// The replica that answered dies; the other gives the same answer.
	p1.kill9()
	code, _, b = p2.do("POST", fork, fbody, "Idempotency-Key", "fork-1")
	if code != http.StatusCreated || !bytes.Equal(b, forks[0]) {
		t.Fatalf("repeat on the other replica after kill -9: %d %s\nwant %s", code, b, forks[0])
	}
	p2.waitRun(f.ID, 3, 30*time.Second)
	code, _, b = p2.do("GET", "/v1/chats?limit=10", nil)
	if code != http.StatusOK || strings.Count(string(b), `"forked_from":{"chat_id":"`+c.ID) != 1 {
		t.Fatalf("chats forked from the source: want 1: %s", b)
	}
}
