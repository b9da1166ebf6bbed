package main

import (
	"cmp"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/agentd/agentd/internal/server"
)

// GuardConfig is the part of Config that protects the server from browsers
// and from clients that take too much (README "Security").
type GuardConfig struct {
	CORSOrigins      string
	AllowedHosts     string
	RateLimit        float64
	RateBurst        int
	MaxStreams       int
	MaxStreamsPerKey int
	MetricsToken     string
	ReadTimeout      time.Duration
	WriteTimeout     time.Duration
	SandboxDiskMB    int
	SandboxMaxDiskMB int
}

func (g *GuardConfig) registerFlags(fs *flag.FlagSet, env *envReader) {
	fs.StringVar(&g.CORSOrigins, "cors-origins", env.str("AGENTD_CORS_ORIGINS", ""), "comma-separated browser origins (https://app.example.com) allowed to call the API; none by default (AGENTD_CORS_ORIGINS)")
	fs.StringVar(&g.AllowedHosts, "allowed-hosts", env.str("AGENTD_ALLOWED_HOSTS", ""), "comma-separated host names the server answers to besides IPs and localhost (*.example.com for subdomains); checked always without API keys, with keys only when set (AGENTD_ALLOWED_HOSTS)")
	fs.Float64Var(&g.RateLimit, "rate-limit", env.float("AGENTD_RATE_LIMIT", server.DefaultRateLimit), "requests per second per API key (or address without one); 0 disables (AGENTD_RATE_LIMIT)")
	fs.IntVar(&g.RateBurst, "rate-burst", env.int("AGENTD_RATE_BURST", server.DefaultRateBurst), "burst of the rate limit (AGENTD_RATE_BURST)")
	fs.IntVar(&g.MaxStreams, "max-streams", env.int("AGENTD_MAX_STREAMS", server.DefaultMaxStreams), "event streams and long polls open at once in total; 0: no cap (AGENTD_MAX_STREAMS)")
	fs.IntVar(&g.MaxStreamsPerKey, "max-streams-per-key", env.int("AGENTD_MAX_STREAMS_PER_KEY", server.DefaultMaxStreamsPerKey), "event streams and long polls open at once per API key; 0: no cap (AGENTD_MAX_STREAMS_PER_KEY)")
	fs.StringVar(&g.MetricsToken, "metrics-token", env.str("AGENTD_METRICS_TOKEN", ""), "bearer token GET /metrics requires; empty: none (AGENTD_METRICS_TOKEN)")
	fs.DurationVar(&g.ReadTimeout, "read-timeout", env.duration("AGENTD_READ_TIMEOUT", 30*time.Second), "time to read a whole request, body included (AGENTD_READ_TIMEOUT)")
	fs.DurationVar(&g.WriteTimeout, "write-timeout", env.duration("AGENTD_WRITE_TIMEOUT", 30*time.Second), "time to write a response; streams and long polls extend it for each write (AGENTD_WRITE_TIMEOUT)")
	fs.IntVar(&g.SandboxDiskMB, "sandbox-disk-mb", env.int("AGENTD_SANDBOX_DISK_MB", 256), "size of a chat's sandbox work dir when the spec sets no sandbox.disk_mb (AGENTD_SANDBOX_DISK_MB)")
	fs.IntVar(&g.SandboxMaxDiskMB, "sandbox-max-disk-mb", env.int("AGENTD_SANDBOX_MAX_DISK_MB", 4096), "largest sandbox.disk_mb a spec may ask for (AGENTD_SANDBOX_MAX_DISK_MB)")
}

func (g *GuardConfig) validate(bad func(string, ...any)) {
	if g.RateLimit < 0 {
		bad("AGENTD_RATE_LIMIT must not be negative")
	}
	if g.RateLimit > 0 && g.RateBurst < 1 {
		bad("AGENTD_RATE_BURST must be at least 1")
	}
	if g.MaxStreams < 0 || g.MaxStreamsPerKey < 0 {
		bad("AGENTD_MAX_STREAMS and AGENTD_MAX_STREAMS_PER_KEY must not be negative")
	}
	if g.ReadTimeout < time.Second || g.WriteTimeout < time.Second {
		bad("AGENTD_READ_TIMEOUT and AGENTD_WRITE_TIMEOUT must be at least 1s")
	}
	if g.SandboxMaxDiskMB < 1 {
		bad("AGENTD_SANDBOX_MAX_DISK_MB must be at least 1")
	}
	if g.SandboxDiskMB < 1 || g.SandboxDiskMB > g.SandboxMaxDiskMB {
		bad("AGENTD_SANDBOX_DISK_MB must be between 1 and AGENTD_SANDBOX_MAX_DISK_MB")
	}
	if err := (server.Config{Guard: g.serverGuard(false)}).Validate(); err != nil {
		bad("%v", err)
	}
}

// serverGuard is the server's Guard; keyed says whether API keys are set.
// Without keys the Host is always checked: anyone who can make a browser
// send a request would own every chat.
func (g *GuardConfig) serverGuard(keyed bool) server.Guard {
	sg := server.Guard{
		CheckHost:        !keyed || g.AllowedHosts != "",
		AllowedHosts:     splitList(g.AllowedHosts),
		CORSOrigins:      splitList(g.CORSOrigins),
		RateLimit:        g.RateLimit,
		RateBurst:        g.RateBurst,
		MaxStreams:       g.MaxStreams,
		MaxStreamsPerKey: g.MaxStreamsPerKey,
		MetricsToken:     g.MetricsToken,
		// Each write of a stream gets the time an ordinary response has.
		StreamWriteTimeout: g.WriteTimeout,
	}
	// Zero in the environment means off; the server's zero means default.
	if sg.RateLimit == 0 {
		sg.RateLimit = -1
	}
	if sg.MaxStreams == 0 {
		sg.MaxStreams = -1
	}
	if sg.MaxStreamsPerKey == 0 {
		sg.MaxStreamsPerKey = -1
	}
	return sg
}

func (e *envReader) float(key string, def float64) float64 {
	v := e.getenv(key)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		e.errs = append(e.errs, fmt.Errorf("%s=%q: not a number", key, v))
		return def
	}
	return f
}

// sandboxWorkRoot is where bwrap work dirs go: the configured directory,
// else one of this deployment, in its data dir (never one shared path per
// host, which a second deployment or user could not use). The sandbox
// user must be able to pass through the data dir to reach it, so the data
// dir is made, with o+x (search, not listing; its files keep their own
// modes). With no sandbox (backend none) the path is only named: a
// replica on Postgres without a sandbox makes no directory.
func sandboxWorkRoot(backend, configured, dataDir string) string {
	if configured != "" {
		return configured
	}
	dir := cmp.Or(dataDir, "agentd-data")
	if backend == "none" {
		return filepath.Join(dir, "sandboxes")
	}
	if err := os.MkdirAll(dir, 0o700); err == nil {
		if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm()&0o001 == 0 {
			_ = os.Chmod(dir, fi.Mode().Perm()|0o001)
		}
	}
	return filepath.Join(dir, "sandboxes")
}
