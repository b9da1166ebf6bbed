package spec_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/spec"
)

// BenchmarkDecodeSpec decodes a spec of three agents with long system
// messages and seven replay responses each (~5 KB), what every create
// pays before validation.
func BenchmarkDecodeSpec(b *testing.B) {
	sys := strings.Repeat("You review code for correctness, clarity and tests; answer briefly. ", 6)
	var agents, models []string
	for _, name := range []string{"coder", "reviewer", "tester"} {
		var rs []string
		for i := range 7 {
			rs = append(rs, fmt.Sprintf(`{"content": "%s-%d: a reply", "usage": {"prompt_tokens": 120, "completion_tokens": 12}}`, name, i))
		}
		agents = append(agents, fmt.Sprintf(`{"name": %q, "type": "assistant", "system_message": %q, "model": "m-%s"}`, name, sys, name))
		models = append(models, fmt.Sprintf(`"m-%s": {"provider": "replay", "responses": [%s]}`, name, strings.Join(rs, ", ")))
	}
	body := fmt.Appendf(nil, `{"task": "Review the change.", "agents": [%s], "models": {%s}, "max_round": 19}`,
		strings.Join(agents, ", "), strings.Join(models, ", "))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, probs := spec.DecodeSpec(body); len(probs) > 0 {
			b.Fatal(probs)
		}
	}
}
