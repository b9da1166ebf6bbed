package server

import (
	"net/http"
	"net/http/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// AdminHandler serves what an operator needs and clients must not reach:
// the Go profiler under /debug/pprof/ and the metrics at /metrics (the same
// as the API listener's). It has no authentication, so it belongs on an
// address only operators reach (loopback, a private network).
func AdminHandler(gatherer prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	// Registered one by one on our own mux: importing net/http/pprof also
	// puts them on http.DefaultServeMux, which nothing here serves.
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	return mux
}
