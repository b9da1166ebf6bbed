package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestAdminListener checks that pprof and metrics are served on the opt-in
// admin address and that the profiler is not reachable through the API.
func TestAdminListener(t *testing.T) {
	cfg := parse(t, envMap("AGENTD_ADDR", "127.0.0.1:0", "AGENTD_ADMIN_ADDR", "127.0.0.1:0", "AGENTD_DATA_DIR", t.TempDir(),
		"AGENTD_SANDBOX", "none"))
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	m := NewMain(cfg, newTestLogger(t))
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	admin := "http://" + m.AdminAddr()
	if code, body := get(admin + "/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Fatalf("admin /debug/pprof/: %d %.200s", code, body)
	}
	if code, body := get(admin + "/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Fatalf("admin goroutine profile: %d %.200s", code, body)
	}
	if code, body := get(admin + "/metrics"); code != http.StatusOK || !strings.Contains(body, `agentd_build_info{goversion="go`) {
		t.Fatalf("admin /metrics: %d %.300s", code, body)
	}
	if code, _ := get("http://" + m.Addr() + "/debug/pprof/"); code != http.StatusNotFound {
		t.Fatalf("API listener /debug/pprof/: %d, want 404", code)
	}

	off := parse(t, envMap("AGENTD_ADDR", "127.0.0.1:0", "AGENTD_DATA_DIR", t.TempDir(), "AGENTD_SANDBOX", "none"))
	m2 := NewMain(off, newTestLogger(t))
	if err := m2.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if m2.AdminAddr() != "" {
		t.Fatalf("admin listener without AGENTD_ADMIN_ADDR: %s", m2.AdminAddr())
	}
}
