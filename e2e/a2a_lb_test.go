package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/store/pgtest"
)

// TestA2AResubscribeThroughLBWhenAReplicaEnds streams a task through
// haproxy in front of two replicas, ends the replica that runs it
// mid-run, and resubscribes with the official client through the
// balancer: the other replica takes the chat over, and the task's
// snapshot plus the updates after it hold every message of the run
// exactly once, the ones the first stream saw among them. Killed (kill
// -9), the replica's stream is cut and the client raises the cut;
// stopped (SIGTERM, no drain), the stream ends with the JSON-RPC error
// saying the server is shutting down, which the client raises: never an
// end that looks like the task's.
func TestA2AResubscribeThroughLBWhenAReplicaEnds(t *testing.T) {
	needA2AJS(t)
	t.Parallel()
	for _, end := range []string{"kill9", "sigterm"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			a2aResubscribe(t, end == "sigterm")
		})
	}
}

func a2aResubscribe(t *testing.T, term bool) {
	env := []string{"AGENTD_DATABASE_URL=" + pgtest.URL(t), "AGENTD_LEASE_TTL=2s", "AGENTD_SHUTDOWN_DRAIN=0s"}
	p1, p2 := startA2A(t, env...), startA2A(t, env...)
	lb := startLB(t, p1, p2)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "js/a2a.mjs", lb, a2aKey, "resubscribe", "slow")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var killed *proc
	var result []byte
	for sc.Scan() {
		var line struct {
			Opened    bool   `json:"opened"`
			ContextID string `json:"contextId"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("a2a.mjs: %q: %v", sc.Text(), err)
		}
		if !line.Opened {
			result = slices.Clone(sc.Bytes())
			continue
		}
		// The replica that created the chat runs it and serves the stream.
		for _, p := range []*proc{p1, p2} {
			if strings.Contains(p.logs.String(), `chat_id=`+line.ContextID) {
				killed = p
			}
		}
		if killed == nil {
			t.Fatalf("no replica logged chat %s", line.ContextID)
		}
		if term {
			killed.stop()
		} else {
			killed.kill9()
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("a2a.mjs: %v\n%s", err, stderr.String())
	}
	var r struct {
		FirstEnded string   `json:"firstEnded"`
		FirstError string   `json:"firstError"`
		First      []string `json:"first"`
		Snapshot   []string `json:"snapshot"`
		Later      []string `json:"later"`
		Final      string   `json:"final"`
		Attempts   int      `json:"attempts"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		t.Fatalf("a2a.mjs result %q: %v", result, err)
	}
	t.Logf("first stream %s (%s) after %d messages; resubscribed in %d attempts: %d in the snapshot, %d after",
		r.FirstEnded, r.FirstError, len(r.First), r.Attempts, len(r.Snapshot), len(r.Later))
	if killed == nil || r.FirstEnded != "broken" {
		t.Fatalf("the first stream was not cut by the replica's end: %+v", r)
	}
	if term && (!strings.Contains(r.FirstError, "the server is shutting down") || !strings.Contains(r.FirstError, "-32603")) {
		t.Errorf("the stream of the stopped replica raised %q, want its JSON-RPC error (-32603) saying the server is shutting down", r.FirstError)
	}
	if r.Final != "TASK_STATE_COMPLETED" {
		t.Errorf("the task ended %s", r.Final)
	}
	all := append(slices.Clone(r.Snapshot), r.Later...)
	seen := map[string]bool{}
	for _, id := range all {
		if seen[id] {
			t.Errorf("message %s twice in %v", id, all)
		}
		seen[id] = true
	}
	for _, id := range r.First {
		if !seen[id] {
			t.Errorf("message %s of the first stream is not in the resubscribed task %v", id, all)
		}
	}
	// Every agent message of the run, in the chat's own log order.
	survivor := p1
	if killed == p1 {
		survivor = p2
	}
	var want []string
	chatID := all[0][:strings.LastIndex(all[0], "-")] // message ids are <chat id>-<seq>
	for _, m := range survivor.messages(chatID) {
		if m.Role == "assistant" {
			want = append(want, chatID+"-"+strconv.FormatInt(m.Seq, 10))
		}
	}
	if !slices.Equal(all, want) {
		t.Errorf("the resubscribed task holds %v, the chat's log %v", all, want)
	}
}
