// Package golden is what the golden tests of e2e/autogen and e2e/swarm
// share: agentd's runtime on an embedded store, calling a model server
// through the openai provider, and the real sandbox backends their
// functions run in.
package golden

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/llm"
	"github.com/agentd/agentd/internal/runtime"
	"github.com/agentd/agentd/internal/sandbox"
	"github.com/agentd/agentd/internal/store"
	"github.com/agentd/agentd/internal/tool"
)

// Runtime starts a runtime on an embedded store in a temporary directory,
// its openai provider pointed at modelsURL (an OpenAI-compatible base URL,
// without retries) and its tools allowed to reach loopback servers and to
// run in sandboxes (nil: none). Everything stops when the test ends.
func Runtime(t *testing.T, modelsURL string, sandboxes chat.Sandboxes) (*runtime.Runtime, store.DB) {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, store.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	providers, err := llm.New(llm.Config{OpenAI: llm.OpenAIConfig{BaseURL: modelsURL, APIKey: "golden", MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	runner, err := tool.New(tool.Config{AllowPrivate: true, Sandboxes: sandboxes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { runner.Close() })
	rt, err := runtime.New(runtime.Config{Store: db, Models: providers, Providers: providers.Providers(), Tools: runner, Sandboxes: sandboxes,
		LeaseDuration: time.Minute, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := rt.Stop(sctx); err != nil {
			t.Error(err)
		}
	})
	return rt, db
}

// Sandbox opens a real sandbox backend (the docker one from DOCKER_HOST
// with AGENTD_SANDBOX_IMAGE): a missing one skips the test, or fails it
// with CI=true.
func Sandbox(t *testing.T, backend string) chat.Sandboxes {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := sandbox.Open(ctx, sandbox.Config{Backend: backend, DockerHost: sandbox.ResolveDockerHost(os.Getenv("DOCKER_HOST")),
		Image: os.Getenv("AGENTD_SANDBOX_IMAGE"), WorkRoot: root, Owner: fmt.Sprintf("agentd-golden-%d", time.Now().UnixNano())})
	if err != nil {
		if os.Getenv("CI") == "true" || !errors.Is(err, sandbox.ErrNoSandbox) {
			t.Fatalf("the %s sandbox is unavailable: %v", backend, err)
		}
		t.Skipf("%s sandbox unavailable: %v", backend, err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// Load reads a golden test's scenario (scenarios/NAME.json) into scenario
// and its recording (testdata/NAME.json) into fixture.
func Load(t *testing.T, name string, scenario, fixture any) {
	t.Helper()
	for path, v := range map[string]any{"scenarios/" + name + ".json": scenario, "testdata/" + name + ".json": fixture} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
}

// Scenarios are the names of a golden test's scenarios (scenarios/*.json);
// none is an error.
func Scenarios(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("scenarios/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = strings.TrimSuffix(filepath.Base(f), ".json")
	}
	return names
}

// Request is a model request body as both sides' comparisons start from
// it: its members, without what may legitimately differ between a
// reference run and agentd's — the model name (the scenario's, sent as the
// operator maps it) and whether and how the reply is streamed.
func Request(body []byte) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	delete(m, "model")
	delete(m, "stream")
	delete(m, "stream_options")
	return m, nil
}

// Ended waits until run n of the chat has ended and no run is queued after
// it, and returns the chat then; after within it fails the test.
func Ended(t *testing.T, rt *runtime.Runtime, chatID string, n int, within time.Duration) *chat.Chat {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		c, err := rt.Get(context.Background(), "", chatID)
		if err != nil {
			t.Fatal(err)
		}
		if c.Run == n && c.Status.Terminal() && c.QueuedRuns == 0 {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %d of the chat not ended: run %d %s", n, c.Run, c.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
