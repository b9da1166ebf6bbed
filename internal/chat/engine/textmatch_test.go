package engine

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentd/agentd/internal/chat"

	"github.com/agentd/agentd/internal/spec"
)

// worstPatterns are patterns at the text_match limits that make RE2 do the
// most work per byte: large programs with many simultaneously live threads
// and no literal prefix to skip ahead with.
func worstPatterns() []string {
	return []string{
		`(?:[a-z]{1,12}){1,4}x`,
		`(?:a|b|c|d|e|f|g|h)*[a-h]{45}x`,
		`(?i)(?:\w{1,11}\s*){4}$`,
		`(?:.{1,12}){4}$`,
		`(?s)(?:.{0,12}){4}x`,
		`(?s).{0,24}.{0,24}x`,
		`(\pL|\pN){15}\z`,
		`(?:[^x]{0,12}[^y]{0,12}){2}z`,
		`(?:(?:a|b)?){19}(?:a|b){19}(?:(?:a|b)?){19}x`,
		`a.*b.*c.*d.*e.*f.*g.*h.*i.*j.*k.*l.*m.*n.*o.*p.*q.*r.*s.*t.*u.*v.*w.*x.*y.*z`,
	}
}

// worstTexts are message contents of the largest size a condition scans
// (and larger: the scope cuts them).
func worstTexts() []string {
	return []string{
		strings.Repeat("a", 65000),
		strings.Repeat("ab", 32500),
		strings.Repeat("abcdefgh ", 65000/9),
		strings.Repeat("é", 40000),
	}
}

func TestTextMatchLimits(t *testing.T) {
	for _, p := range worstPatterns() {
		if msg := spec.CheckTextMatchPattern(p); msg != "" {
			t.Errorf("worst-case pattern %q is refused (%s): the benchmark would measure nothing", p, msg)
		}
	}
	for _, tc := range []struct {
		pattern, want string
	}{
		{strings.Repeat("a", spec.MaxTextMatchPattern+1), "bytes long"},
		{`a{51}`, "repeats 51 times"},
		{`(a{100}){100}`, "valid"},
		{`((a{1,20}){1,20}){1,2}`, "too complex"},
		{`[`, "not a valid RE2"},
		{`(?:\w{1,40}){1,5}`, "too complex"},
		{`(?s)(?:.{0,30}){4}x`, "too complex"},
	} {
		if got := spec.CheckTextMatchPattern(tc.pattern); !strings.Contains(got, tc.want) {
			t.Errorf("checkTextMatchPattern(%.40q) = %q, want it to contain %q", tc.pattern, got, tc.want)
		}
	}
	for _, ok := range []string{`TERMINATE`, `(?i)\bdone\b`, `^APPROVE$`, `a{50}`} {
		if got := spec.CheckTextMatchPattern(ok); got != "" {
			t.Errorf("checkTextMatchPattern(%q) = %q, want it accepted", ok, got)
		}
	}
	long := strings.Repeat("x", 2*spec.MaxTextMatchScan) + "é" + "TERMINATE"
	if s := textMatchScope(long); len(s) > spec.MaxTextMatchScan || !strings.HasSuffix(s, "TERMINATE") {
		t.Errorf("scope of a long message: %d bytes, suffix %q", len(s), s[max(0, len(s)-9):])
	}
}

// BenchmarkTextMatchWorstCase prints the worst CPU time one text_match
// condition takes on one message at the maximum sizes.
func BenchmarkTextMatchWorstCase(b *testing.B) {
	var worst time.Duration
	var worstDesc string
	for _, p := range worstPatterns() {
		re := regexp.MustCompile(p)
		for ti, text := range worstTexts() {
			start := time.Now()
			const n = 3
			for range n {
				re.MatchString(textMatchScope(text))
			}
			if d := time.Since(start) / n; d > worst {
				worst, worstDesc = d, fmt.Sprintf("pattern %q, text %d", p, ti)
			}
		}
	}
	b.ReportMetric(float64(worst.Microseconds())/1000, "worst-ms/message")
	b.Logf("worst-case text_match cost per message: %s (%s; pattern ≤ %d bytes, repeat ≤ %d, program ≤ %d instructions, scan ≤ %d bytes)",
		worst, worstDesc, spec.MaxTextMatchPattern, spec.MaxTextMatchRepeat, spec.MaxTextMatchProgram, spec.MaxTextMatchScan)
}

// FuzzTermination decodes and validates a termination tree and feeds an
// accepted one a message: nothing may panic, and an accepted text_match
// pattern is within the limits.
func FuzzTermination(f *testing.F) {
	f.Add(`{"text_match": {"pattern": "(?i)terminate"}}`, "Please TERMINATE now", "a")
	f.Add(`{"any": [{"max_messages": 3}, {"text_mention": {"text": "DONE", "sources": ["a"]}}]}`, "DONE", "a")
	f.Add(`{"all": [{"text_match": {"pattern": "^ok$"}}, {"token_usage": {"max_total_tokens": 10}}]}`, "ok", "b")
	f.Add(`{"timeout_s": 0.5}`, "", "a")
	f.Add(`{"text_match": {"pattern": "(a{50}){2}"}}`, strings.Repeat("a", 5000), "a")
	f.Fuzz(func(t *testing.T, cond, content, name string) {
		body := `{"task": "t", "agents": [{"name": "a", "type": "assistant", "model": "m"}], ` +
			`"models": {"m": {"provider": "replay", "responses": ["x"]}}, "termination": ` + cond + `}`
		sp, probs := spec.DecodeSpec([]byte(body))
		if sp == nil || len(probs) > 0 || len(spec.Validate(sp, spec.Limits{}, spec.Env{})) > 0 || sp.Termination == nil {
			return
		}
		var walk func(c *spec.Condition)
		walk = func(c *spec.Condition) {
			if c.TextMatch != nil && spec.CheckTextMatchPattern(c.TextMatch.Pattern) != "" {
				t.Fatalf("an accepted spec has a text_match pattern beyond the limits: %q", c.TextMatch.Pattern)
			}
			for i := range c.Any {
				walk(&c.Any[i])
			}
			for i := range c.All {
				walk(&c.All[i])
			}
		}
		walk(sp.Termination)
		term := newTerminator(sp.Termination)
		now := time.Now()
		st := termState{messages: 1, start: now.Add(-time.Second), now: now}
		term.observe(nil, st)
		st.messages++
		if term.observe([]termMsg{{Message: chat.Message{Role: "assistant", Name: name, Content: content}}}, st) {
			if reason, _ := term.result(); reason == "" {
				t.Fatal("a fired tree has no stop reason")
			}
		}
	})
}

// FuzzTextMatchPattern checks the pattern limits against the parser:
// whatever passes compiles, and the scope of any text stays valid UTF-8
// when the text is.
func FuzzTextMatchPattern(f *testing.F) {
	for _, p := range worstPatterns() {
		f.Add(p, "abc")
	}
	f.Add(`[`, "é"+strings.Repeat("x", spec.MaxTextMatchScan))
	f.Fuzz(func(t *testing.T, pattern, text string) {
		if spec.CheckTextMatchPattern(pattern) == "" {
			if _, err := regexp.Compile(pattern); err != nil {
				t.Fatalf("accepted %q, which does not compile: %v", pattern, err)
			}
		}
		s := textMatchScope(text)
		if len(s) > spec.MaxTextMatchScan || !strings.HasSuffix(text, s) {
			t.Fatalf("scope of %d bytes: %d bytes, not a suffix", len(text), len(s))
		}
		if utf8.ValidString(text) && !utf8.ValidString(s) {
			t.Fatalf("the scope of valid UTF-8 is not valid UTF-8")
		}
	})
}
