package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentd/agentd/internal/chat"
)

// envSecret stands in for agentd's API key: the escape suite checks that no
// sandbox sees it. It is set for the whole test process (t.Setenv would rule
// out parallel subtests).
const envSecret = "sk-agentd-test-secret-7f3a9c"

func TestMain(m *testing.M) {
	os.Setenv("OPENAI_API_KEY", envSecret)
	goleak.VerifyTestMain(m)
}

// ci reports whether a missing engine or bwrap must fail the test (CI=true)
// rather than skip it.
func ci() bool { return os.Getenv("CI") == "true" }

// dockerHost is the engine the tests use: DOCKER_HOST, else Podman's
// rootful socket, else Docker's.
func dockerHost() string { return ResolveDockerHost(os.Getenv("DOCKER_HOST")) }

// testConfig is a Config for backend with limits small enough to keep the
// suite fast. Each call has its own Owner (docker) and WorkRoot (bwrap), so
// tests never see, or reap, each other's sandboxes.
func testConfig(t testing.TB, backend string) Config {
	root := t.TempDir()
	// The bwrap sandbox uid must be able to reach the work root (see
	// Config.WorkRoot); TempDir's parent is private.
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return Config{
		Backend:         backend,
		DockerHost:      dockerHost(),
		Image:           os.Getenv("AGENTD_SANDBOX_IMAGE"),
		WorkRoot:        root,
		DefaultMemoryMB: 128,
		DefaultCPUs:     1,
		DefaultTimeout:  3 * time.Second,
		PidsLimit:       64,
		OutputLimit:     64 << 10,
		Owner:           "agentd-test-" + randomID(),
	}
}

// open opens cfg's backend, or skips (fails in CI) the test when the backend
// is not available here.
func open(t testing.TB, cfg Config) Manager {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, err := Open(ctx, cfg)
	if err != nil {
		if !errors.Is(err, ErrNoSandbox) {
			t.Fatalf("open %s: %v", cfg.Backend, err)
		}
		if ci() {
			t.Fatalf("CI=true and the %s sandbox is unavailable (a failure, not a skip): %v", cfg.Backend, err)
		}
		t.Skipf("%s sandbox unavailable: %v", cfg.Backend, err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return m
}

func randomID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newChat returns a fresh chat id whose sandbox is released when the test
// ends.
func newChat(t testing.TB, m Manager) string {
	id := "t" + randomID()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := m.Release(ctx, id); err != nil {
			t.Errorf("release %s: %v", id, err)
		}
	})
	return id
}

// run executes code and fails the test if the sandbox could not run it.
func run(t testing.TB, m Manager, req *chat.ExecRequest) *chat.ExecResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := m.Exec(ctx, req)
	if err != nil {
		t.Fatalf("exec %s in chat %s: %v", req.Language, req.ChatID, err)
	}
	return res
}
