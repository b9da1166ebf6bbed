package frontend_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentd/agentd/internal/frontend"
)

func TestWithDefaultsFillsOnlyZeroNumbers(t *testing.T) {
	t.Parallel()
	def := frontend.Settings{MaxBodyBytes: 1 << 20, RunWait: 30 * time.Minute, Heartbeat: 15 * time.Second}
	got := frontend.Settings{}.WithDefaults(def)
	if got.MaxBodyBytes != def.MaxBodyBytes || got.RunWait != def.RunWait || got.Heartbeat != def.Heartbeat || got.Fail != nil {
		t.Errorf("zero settings with defaults = %+v, want %+v", got, def)
	}
	called := false
	set := frontend.Settings{MaxBodyBytes: 10, RunWait: time.Second, Heartbeat: time.Millisecond,
		Fail: func(http.ResponseWriter, *http.Request, error) { called = true }}
	got = set.WithDefaults(def)
	if got.MaxBodyBytes != 10 || got.RunWait != time.Second || got.Heartbeat != time.Millisecond {
		t.Errorf("set settings with defaults = %+v, want them kept", got)
	}
	got.Fail(nil, nil, nil)
	if !called {
		t.Error("Fail was not kept")
	}
}

func TestReadBodyCapsAtTheLimit(t *testing.T) {
	t.Parallel()
	const limit = 16
	read := func(body string) ([]byte, error) {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		return frontend.ReadBody(httptest.NewRecorder(), r, limit)
	}
	at := strings.Repeat("a", limit)
	got, err := read(at)
	if err != nil || string(got) != at {
		t.Fatalf("body at the limit: %q, %v; want it whole", got, err)
	}
	_, err = read(at + "b")
	var tooLarge *http.MaxBytesError
	if !errors.As(err, &tooLarge) || tooLarge.Limit != limit || !frontend.TooLarge(err) {
		t.Fatalf("body one byte over: err = %v, want an *http.MaxBytesError of limit %d", err, limit)
	}
}

func TestReadBodyUnreadableIsNotTooLarge(t *testing.T) {
	t.Parallel()
	broken := errors.New("connection reset")
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.Body = io.NopCloser(iotest.ErrReader(broken))
	_, err := frontend.ReadBody(httptest.NewRecorder(), r, 16)
	if !errors.Is(err, broken) || frontend.TooLarge(err) {
		t.Fatalf("unreadable body: err = %v (too large %v), want %v and not too large", err, frontend.TooLarge(err), broken)
	}
}

func TestRegisterTwiceIsAnErrorNamingTheFrontEnd(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	collectors := func() []prometheus.Collector {
		return []prometheus.Collector{
			prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentd_test_runs_total", Help: "Runs."}, []string{"outcome"}),
			prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentd_test_streams_open", Help: "Streams."}),
		}
	}
	if err := frontend.Register(reg, "test", collectors()...); err != nil {
		t.Fatalf("first registration: %v", err)
	}
	err := frontend.Register(reg, "test", collectors()...)
	var already prometheus.AlreadyRegisteredError
	if !errors.As(err, &already) || !strings.HasPrefix(err.Error(), "register test metrics: ") {
		t.Fatalf("second registration: err = %v, want an AlreadyRegisteredError wrapped as register test metrics", err)
	}
}
