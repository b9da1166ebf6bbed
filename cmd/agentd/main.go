// Command agentd runs multi-agent group chats as an HTTP service.
//
//	agentd [serve]   run the server (default)
//	agentd migrate   apply database migrations and exit
//	agentd health    exit 0 if the server at -addr answers /healthz (for HEALTHCHECK)
//	agentd version   print the version
//	agentd chat …    a client: run, follow, answer, again, fork, approve… chats
//	agentd team …    saved teams: put, ls, show
//	agentd help      list the commands
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/agentd/agentd/internal/gcfloor"
)

// version is set at build time with -ldflags "-X main.version=…"; see
// buildVersion for builds without it.
var version = "dev"

// buildVersion is the version this binary reports: the one set at build
// time (make build, the images), else the module version the go command
// recorded (`go install github.com/agentd/agentd/cmd/agentd@v1.2.3`
// records v1.2.3), else "dev".
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	return pickVersion(version, info, ok)
}

// pickVersion is buildVersion's choice, apart from the process.
func pickVersion(set string, info *debug.BuildInfo, ok bool) string {
	if set != "dev" && set != "" {
		return set
	}
	if ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "dev"
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run is main without the process: it parses the command line and returns
// the exit code, so tests can drive every subcommand in-process.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	} else if len(args) == 1 {
		// No command: the top-level help and version flags.
		switch args[0] {
		case "-h", "-help", "--help":
			fmt.Fprint(stdout, usage)
			fmt.Fprintln(stdout, "\nflags of serve (and migrate, health):")
			// Defaults without the environment: it may hold secrets.
			printFlags(stdout, func(string) string { return "" })
			return 0
		case "-version", "--version":
			cmd, args = "version", nil
		}
	}
	switch cmd {
	case "chat":
		return chatCommand(ctx, args, getenv, stdout, stderr)
	case "team":
		return teamCommand(ctx, args, getenv, stdout, stderr)
	case "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fs := flag.NewFlagSet("agentd "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	cfg.RegisterFlags(fs, getenv)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			// Asked for: the flags are printed, and that is success.
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "agentd %s: unexpected arguments %q\n", cmd, fs.Args())
		return 2
	}
	switch cmd {
	case "version":
		fmt.Fprintln(stdout, "agentd", buildVersion())
		return 0
	case "health":
		return health(ctx, cfg.Addr, stderr)
	case "serve", "migrate":
	default:
		fmt.Fprintf(stderr, "agentd: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "agentd: invalid configuration:\n%s\n", indent(err.Error()))
		return 2
	}
	logger, err := newLogger(cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "agentd:", err)
		return 2
	}
	if cmd == "migrate" {
		if err := migrate(ctx, cfg, logger); err != nil {
			logger.Error("migrate", "err", err)
			return 1
		}
		return 0
	}
	// The collector's floor is the process's, not one Main's: in-process
	// tests run several Mains, so it is set here and not in Main.
	if t := gcfloor.New(uint64(cfg.GCHeapFloor)); t != nil {
		tctx, stopTuning := context.WithCancel(ctx)
		tuned := make(chan struct{})
		go func() { defer close(tuned); t.Run(tctx, 250*time.Millisecond) }()
		defer func() { stopTuning(); <-tuned }()
		logger.Debug("garbage collector floor", "bytes", cfg.GCHeapFloor, "gogc", t.Base())
	}
	m := NewMain(cfg, logger)
	if err := m.Run(ctx); err != nil {
		logger.Error("start", "err", err)
		_ = m.Close()
		return 1
	}
	<-ctx.Done()
	logger.Info("shutting down", "grace", cfg.ShutdownGrace)
	if err := m.Close(); err != nil {
		logger.Error("shutdown", "err", err)
		return 1
	}
	return 0
}

// usage is the top-level help (agentd help, agentd --help).
const usage = `usage: agentd [command] [flags]

commands:
  serve     run the server (the default)
  migrate   apply the database migrations and exit
  health    exit 0 if the server at -addr answers /healthz (for HEALTHCHECK)
  version   print the version (also --version)
  chat      a client of a running server: run, ls, show, follow, answer, cancel,
            again, stop, fork, approve, rm, set (agentd chat --help)
  team      saved teams on a running server: put, ls, show (agentd team --help)
  help      this text

Every flag of serve has an environment variable (AGENTD_…); see agentd serve -h.
`

// printFlags lists the server's flags with their defaults from getenv.
func printFlags(w io.Writer, getenv func(string) string) {
	fs := flag.NewFlagSet("agentd", flag.ContinueOnError)
	var cfg Config
	cfg.RegisterFlags(fs, getenv)
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}

func newLogger(cfg Config, w io.Writer) (*slog.Logger, error) {
	level, err := parseLevel(cfg.LogLevel)
	if err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("unknown log level %q", s)
	}
	return l, nil
}

// health asks a running agentd for /healthz; images without curl use it as
// their HEALTHCHECK.
func health(ctx context.Context, addr string, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/healthz", nil)
	if err != nil {
		fmt.Fprintln(stderr, "agentd health:", err)
		return 1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(stderr, "agentd health:", err)
		return 1
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		fmt.Fprintln(stderr, "agentd health: status", resp.Status)
		return 1
	}
	return 0
}
