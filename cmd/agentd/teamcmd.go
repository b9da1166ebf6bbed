package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentd/agentd/internal/client"
)

const teamUsage = `usage: agentd team <command> [flags] [arguments]

Saved teams on an agentd server (AGENTD_URL, AGENTD_API_KEY as for agentd chat).
A team is a chat spec without a task, or an AutoGen AgentChat team component;
every put stores a new immutable version (1, 2, …) unless the file equals the
latest one. Create a chat from it with {"team_ref": "NAME" or "NAME@N", "task": …}.

commands:
  put NAME FILE         save FILE (- for stdin) as the next version of NAME
  ls                    the latest version of each team (--limit, --cursor)
  show NAME[@N]         a team's latest version (or version N), with its spec

flags (every command):
  --json                print JSON
  --url URL             the server (default $AGENTD_URL)
`

// metaFlags collects repeated --meta KEY=VALUE flags.
type metaFlags []string

func (m *metaFlags) String() string { return strings.Join(*m, ",") }

func (m *metaFlags) Set(v string) error {
	if k, _, ok := strings.Cut(v, "="); !ok || k == "" {
		return fmt.Errorf("--meta %q: want KEY=VALUE", v)
	}
	*m = append(*m, v)
	return nil
}

// teamCommand runs `agentd team …`.
func teamCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, teamUsage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitCompleted
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("agentd team "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	baseURL := fs.String("url", cmp.Or(getenv("AGENTD_URL"), "http://127.0.0.1:8080"), "")
	asJSON := fs.Bool("json", false, "")
	limit := fs.Int("limit", 0, "")
	cursor := fs.String("cursor", "", "")
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, teamUsage)
		return exitCompleted
	}
	if err != nil {
		fmt.Fprintf(stderr, "agentd team %s: %v\n\n%s", sub, err, teamUsage)
		return exitUsage
	}
	c, err := client.New(*baseURL, getenv("AGENTD_API_KEY"), nil)
	if err != nil {
		fmt.Fprintln(stderr, "agentd team:", err)
		return exitUsage
	}
	out := &printer{w: stdout, json: *asJSON}
	want := func(n int, what string) bool {
		if len(pos) != n {
			fmt.Fprintf(stderr, "agentd team %s: want %s\n\n%s", sub, what, teamUsage)
			return false
		}
		return true
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "agentd team %s: %v\n", sub, err)
		return exitError
	}
	switch sub {
	case "put":
		if !want(2, "a team name and a file") {
			return exitUsage
		}
		body, err := readSpec(pos[1])
		if err != nil {
			return fail(err)
		}
		t, err := c.PutTeam(ctx, pos[0], body)
		if err != nil {
			return fail(err)
		}
		if out.json {
			out.raw(t.Raw)
		} else {
			fmt.Fprintf(stdout, "team %s version %d (saved %s); use it with {\"team_ref\": \"%s\", \"task\": …}\n",
				t.Name, t.Version, t.CreatedAt.Local().Format(time.DateTime), t.Name)
		}
		return exitCompleted
	case "ls":
		if !want(0, "no arguments") {
			return exitUsage
		}
		l, err := c.ListTeams(ctx, *limit, *cursor)
		if err != nil {
			return fail(err)
		}
		if out.json {
			out.raw(l.Raw)
			return exitCompleted
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tLATEST\tSAVED")
		for _, t := range l.Teams {
			fmt.Fprintf(tw, "%s\t%d\t%s\n", t.Name, t.Version, t.CreatedAt.Local().Format(time.DateTime))
		}
		tw.Flush()
		if l.NextCursor != nil {
			fmt.Fprintf(stdout, "more: agentd team ls --cursor %s\n", *l.NextCursor)
		}
		return exitCompleted
	case "show":
		if !want(1, "NAME or NAME@VERSION") {
			return exitUsage
		}
		name, v, hasVersion := strings.Cut(pos[0], "@")
		version := 0
		if hasVersion {
			if version, err = strconv.Atoi(v); err != nil || version < 1 {
				fmt.Fprintf(stderr, "agentd team show: %q: the version after @ is a number from 1\n", pos[0])
				return exitUsage
			}
		}
		t, err := c.GetTeam(ctx, name, version)
		if err != nil {
			return fail(err)
		}
		if out.json {
			out.raw(t.Raw)
		} else {
			fmt.Fprintf(stdout, "team %s version %d (saved %s)\n%s\n", t.Name, t.Version, t.CreatedAt.Local().Format(time.DateTime), t.Spec)
		}
		return exitCompleted
	default:
		fmt.Fprintf(stderr, "agentd team: unknown command %q\n\n%s", sub, teamUsage)
		return exitUsage
	}
}
