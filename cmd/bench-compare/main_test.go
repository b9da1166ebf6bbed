package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/spec"
)

// TestMain lets the test binary be the bare relay of the streaming phase,
// as the program is (see relayEnv).
func TestMain(m *testing.M) {
	if relayed() {
		return
	}
	os.Exit(m.Run())
}

// The workload must stay a valid spec as the spec language evolves.
func TestChatSpecIsValid(t *testing.T) {
	for _, delay := range []int{0, 600_000} {
		sp, probs := spec.DecodeSpec(chatSpec(20, delay))
		if len(probs) == 0 {
			probs = spec.Validate(sp, spec.Limits{}, spec.Env{})
		}
		if len(probs) > 0 {
			t.Fatalf("chatSpec(20, %d): %v", delay, probs)
		}
		if len(sp.Agents) != 3 || *sp.MaxRound != 19 {
			t.Fatalf("chatSpec: %d agents, max_round %d", len(sp.Agents), *sp.MaxRound)
		}
	}
}

// So must the streaming phase's, with the openai provider configured.
func TestStreamSpecIsValid(t *testing.T) {
	sp, probs := spec.DecodeSpec(streamSpec(3, "7"))
	if len(probs) == 0 {
		probs = spec.Validate(sp, spec.Limits{}, spec.Env{Providers: []string{"openai"}})
	}
	if len(probs) > 0 {
		t.Fatalf("streamSpec(3, 7): %v", probs)
	}
}

func TestProcStatReadsThisProcess(t *testing.T) {
	f, err := procStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if f.ppid != os.Getppid() {
		t.Fatalf("ppid = %d, want %d", f.ppid, os.Getppid())
	}
	if _, err := rssOf(os.Getpid()); err != nil {
		t.Fatal(err)
	}
}

// TestOneTinyRound runs the whole program for one short round against a
// throwaway Postgres and an agentd built from this checkout: the benchmark
// itself keeps working (its figures are not checked: they mean nothing at
// this size and on a shared machine).
func TestOneTinyRound(t *testing.T) {
	if testing.Short() {
		t.Skip("builds agentd and starts a Postgres server")
	}
	bin := filepath.Join(t.TempDir(), "agentd")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/agentd")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build agentd: %v\n%s", err, out)
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	err := run(ctx, config{conc: []int{2}, rounds: 2, duration: time.Second, warmup: 500 * time.Millisecond,
		messages: 4, waiting: 20, history: 50, agentd: bin, out: &out, waits: 2 * time.Millisecond,
		phases:      map[string]bool{"table": true, "stream": true, "idle": true, "memory": true, "scale": true},
		streamChats: 3, streamReplies: 2, streamTokens: 5, streamFirst: 100 * time.Millisecond, streamEvery: 5 * time.Millisecond, streamRounds: 1,
		idle:       20,
		scaleChats: 20, scaleTokens: 3, scaleReply: 200 * time.Millisecond, scaleFollow: 0.1, scaleWarmup: 500 * time.Millisecond, scaleDuration: 2 * time.Second,
		scaleCreateWithin: time.Minute, scaleStores: []string{"postgres", "sqlite"}, scaleH2C: true})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"pgbench row", "agentd msg", "agentd msg, SQLite", "× PG", "memory: 20 chats", "KB/chat", "heap live",
		"20 chats waiting in a streamed reply (OpenAI wire, HTTP/2)",
		"bare relay", "agentd, one replica", "agentd, two replicas", "6/6", "first round of each system", "idle streams: 20", "KB/stream",
		"scale: 20 chats", "HTTP/2 (h2c)", "postgres", "sqlite", "of ideal"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// The sampler found the committer's connection and printed the shares
	// of its states.
	if m := regexp.MustCompile(`group-commit connection at C=2 \(([0-9]+) samples\): (.*)`).FindStringSubmatch(out.String()); m == nil || m[1] == "0" || !strings.Contains(m[2], "%") {
		t.Errorf("no samples of the group-commit connection (%q):\n%s", m, out.String())
	}
	// The SQLite line counted messages from its log (the last figure before
	// the rounds' ratios): a query that found none would print a line of
	// zeros.
	if m := regexp.MustCompile(`agentd msg, SQLite +[0-9]+ .* ([0-9]+)  +[0-9. ]+\n`).FindStringSubmatch(out.String()); m == nil || m[1] == "0" {
		t.Errorf("no messages on the SQLite line (%q):\n%s", m, out.String())
	}
	t.Log(out.String())
}
