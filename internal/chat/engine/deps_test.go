package engine

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestNoIO: the engine decides and the runtime does, so the engine (and the
// leaf package of types it builds on) import no package that can reach a
// socket, a database, a process or a log, and of agentd only the spec and
// what the spec needs. A change that makes the fold or the choice of the
// next step do I/O fails here, not in review.
func TestNoIO(t *testing.T) {
	forbidden := []string{"net", "database", "os/exec", "os/signal", "log", "crypto/rand",
		"github.com/prometheus", "go.opentelemetry.io", "github.com/jackc", "github.com/google/uuid"}
	allowedAgentd := []string{"internal/chat", "internal/chat/engine", "internal/spec", "internal/spec/problem", "internal/structured", "internal/pytext",
		"internal/varexpr", "internal/chat/internal/jsonobj"}
	// cel-go (internal/varexpr: the expressions over context variables)
	// imports net/url and net/netip for its URL and IP types: they parse
	// text and open no socket, unlike the rest of net.
	pure := []string{"net/url", "net/netip"}
	for _, pkg := range []string{".", ".."} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range forbidden {
				if (dep == f || strings.HasPrefix(dep, f+"/")) && !slices.Contains(pure, dep) {
					t.Errorf("%s imports %s", pkg, dep)
				}
			}
			if rest, ok := strings.CutPrefix(dep, "github.com/agentd/agentd/"); ok && !slices.Contains(allowedAgentd, rest) {
				t.Errorf("%s imports %s", pkg, dep)
			}
		}
	}
}
