package server

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentd/agentd/internal/chat"
)

// metric returns the value of the counter, or the number of observations
// of the histogram, of the family name whose labels include want (zeros
// if absent).
func metric(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) (value float64, observations uint64) {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue metrics
				}
			}
			return m.GetCounter().GetValue(), m.GetHistogram().GetSampleCount()
		}
	}
	return 0, 0
}

// counterValue returns agentd_http_requests_total for the labels (0 if absent).
func counterValue(t *testing.T, ts *testServer, method, route, code string) float64 {
	t.Helper()
	v, _ := metric(t, ts.reg, "agentd_http_requests_total", map[string]string{"method": method, "route": route, "code": code})
	return v
}

// histogramCount returns the number of observations of the duration histogram for the labels.
func histogramCount(t *testing.T, ts *testServer, method, route string) uint64 {
	t.Helper()
	_, n := metric(t, ts.reg, "agentd_http_request_duration_seconds", map[string]string{"method": method, "route": route})
	return n
}

// Metrics are labelled by route pattern, never by raw path.
func TestHTTPMetrics(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, Config{}, &fakeChats{
		get: func(_ context.Context, _, id string) (*chat.Chat, error) {
			if id == testChatID {
				return sampleChat(chat.StatusRunning), nil
			}
			return nil, chat.ErrNotFound
		},
		list: func(context.Context, *chat.ListChatsParams) ([]*chat.Chat, string, error) { return nil, "", nil },
	})
	ts.do(t, http.MethodGet, "/v1/chats/"+testChatID, "")
	ts.do(t, http.MethodGet, "/v1/chats/"+testChatID, "")
	ts.do(t, http.MethodGet, "/v1/chats/6f1b2f0c-0000-4000-8000-000000000000", "")
	ts.do(t, http.MethodGet, "/v1/chats", "")
	ts.do(t, http.MethodGet, "/healthz", "")
	ts.do(t, http.MethodGet, "/random/"+testChatID, "")
	ts.do(t, http.MethodPut, "/v1/chats/"+testChatID, "")

	for _, tt := range []struct {
		method, route, code string
		want                float64
	}{
		{"GET", "/v1/chats/{id}", "200", 2},
		{"GET", "/v1/chats/{id}", "404", 1},
		{"GET", "/v1/chats", "200", 1},
		{"GET", "/healthz", "200", 1},
		{"GET", "unmatched", "404", 1},
		{"PUT", "unmatched", "405", 1},
	} {
		if got := counterValue(t, ts, tt.method, tt.route, tt.code); got != tt.want {
			t.Errorf("requests{%s %s %s} = %v, want %v", tt.method, tt.route, tt.code, got, tt.want)
		}
	}
	if got := histogramCount(t, ts, "GET", "/v1/chats/{id}"); got != 3 {
		t.Errorf("duration count for GET /v1/chats/{id} = %d, want 3", got)
	}

	rec := ts.do(t, http.MethodGet, "/metrics", "")
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics status %d", rec.Code)
	}
	body := rec.Body.String()
	for _, want := range []string{
		`agentd_http_requests_total{code="200",method="GET",route="/v1/chats/{id}"} 2`,
		`agentd_http_request_duration_seconds_bucket{method="GET",route="/v1/chats/{id}",le="+Inf"} 3`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, testChatID) {
		t.Error("a chat id leaked into a metric label")
	}
}
