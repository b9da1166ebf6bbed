package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		ms, header string
		want       time.Duration
		ok         bool
	}{
		{"", "", 0, false},
		{"", "1", time.Second, true},
		{"", " 120 ", 2 * time.Minute, true},
		{"", "0", 0, true},
		{"", "-1", 0, false},
		{"", "1.5", 0, false},
		{"", "soon", 0, false},
		{"", "99999999999999999", 24 * time.Hour, true}, // clamped, not overflowed
		{"", now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{"", now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"250", "10", 250 * time.Millisecond, true}, // retry-after-ms wins
		{"12.5", "", 12500 * time.Microsecond, true},
		{"junk", "3", 3 * time.Second, true},
	} {
		got, ok := parseRetryAfter(tc.ms, tc.header, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseRetryAfter(%q, %q) = %v, %v; want %v, %v", tc.ms, tc.header, got, ok, tc.want, tc.ok)
		}
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	base, maxWait := 500*time.Millisecond, 20*time.Second
	for _, tc := range []struct {
		n        int
		lo, high time.Duration
	}{
		{1, 250 * time.Millisecond, 500 * time.Millisecond},
		{2, 500 * time.Millisecond, time.Second},
		{3, time.Second, 2 * time.Second},
		{7, 10 * time.Second, 20 * time.Second}, // 32s capped at 20s
		{1000, 10 * time.Second, 20 * time.Second},
	} {
		lo := backoff(base, maxWait, tc.n, func() float64 { return 0 })
		hi := backoff(base, maxWait, tc.n, func() float64 { return 0.9999999999 })
		if lo != tc.lo || hi < tc.high-time.Microsecond || hi > tc.high {
			t.Errorf("backoff(retry %d) spans [%v, %v], want [%v, %v]", tc.n, lo, hi, tc.lo, tc.high)
		}
	}
	if got := retryWait(&attempt{retryAfter: "30"}, base, maxWait, 1, time.Now()); got != 20*time.Second {
		t.Errorf("Retry-After above the cap: wait %v, want 20s", got)
	}
	if got := retryWait(&attempt{retryAfter: "2"}, base, maxWait, 1, time.Now()); got != 2*time.Second {
		t.Errorf("Retry-After 2: wait %v, want 2s", got)
	}
}

func TestRetryReason(t *testing.T) {
	t.Parallel()
	apiErr := func(status int) error { return &openai.APIError{HTTPStatusCode: status, Message: "m"} }
	for _, tc := range []struct {
		name   string
		a      attempt
		err    error
		reason string
		retry  bool
	}{
		{"429", attempt{sent: true, status: 429}, apiErr(429), reasonRateLimit, true},
		{"500", attempt{sent: true, status: 500}, apiErr(500), reasonServerError, true},
		{"503 non-JSON", attempt{sent: true, status: 503}, &openai.RequestError{HTTPStatusCode: 503}, reasonServerError, true},
		{"400", attempt{sent: true, status: 400}, apiErr(400), "", false},
		{"401", attempt{sent: true, status: 401}, apiErr(401), "", false},
		{"404", attempt{sent: true, status: 404}, apiErr(404), "", false},
		{"409", attempt{sent: true, status: 409}, apiErr(409), "", false},
		{"status only in the error", attempt{sent: true}, apiErr(502), reasonServerError, true},
		{"attempt timed out", attempt{sent: true, timedOut: true}, fmt.Errorf("post: %w", context.DeadlineExceeded), reasonTimeout, true},
		{"connection refused", attempt{sent: true, transportErr: syscall.ECONNREFUSED}, syscall.ECONNREFUSED, reasonConnection, true},
		{"body cut off", attempt{sent: true, status: 200}, io.ErrUnexpectedEOF, reasonConnection, true},
		{"garbled 200", attempt{sent: true, status: 200}, errors.New("invalid character 'x'"), "", false},
		{"refused by go-openai before sending", attempt{}, openai.ErrReasoningModelMaxTokensDeprecated, "", false},
	} {
		reason, retry := retryReason(&tc.a, tc.err)
		if reason != tc.reason || retry != tc.retry {
			t.Errorf("%s: retryReason = %q, %v; want %q, %v", tc.name, reason, retry, tc.reason, tc.retry)
		}
	}
}

func TestSanitizeName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"coder", "coder"},
		{"code-review_2", "code-review_2"},
		{"Dr. Who", "Dr__Who"},
		{"日本", "__"},
		{"\xff", "_"},
	} {
		if got := sanitizeName(tc.in); got != tc.want {
			t.Errorf("sanitizeName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzSanitizeName(f *testing.F) {
	for _, s := range []string{"", "coder", "Dr. Who", "日本語", "\xff\xfe", string(make([]byte, 100))} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := sanitizeName(s)
		if s == "" {
			if got != "" {
				t.Fatalf("sanitizeName(%q) = %q, want empty", s, got)
			}
			return
		}
		if len(got) == 0 || len(got) > maxNameLen {
			t.Fatalf("sanitizeName(%q) = %q: length %d", s, got, len(got))
		}
		for _, c := range []byte(got) {
			if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
				t.Fatalf("sanitizeName(%q) = %q: byte %q not allowed", s, got, c)
			}
		}
		if again := sanitizeName(got); again != got {
			t.Fatalf("sanitizeName is not idempotent: %q → %q → %q", s, got, again)
		}
	})
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"", "1", "-5", "1e9", "Wed, 21 Oct 2015 07:28:00 GMT", "99999999999999999999"} {
		f.Add(s, s)
	}
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Fuzz(func(t *testing.T, ms, header string) {
		d, ok := parseRetryAfter(ms, header, now)
		if d < 0 || d > 24*time.Hour {
			t.Fatalf("parseRetryAfter(%q, %q) = %v", ms, header, d)
		}
		if !ok && d != 0 {
			t.Fatalf("parseRetryAfter(%q, %q) = %v, false", ms, header, d)
		}
	})
}
