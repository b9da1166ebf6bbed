package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentd/agentd/internal/api"
	"github.com/agentd/agentd/internal/client"
)

// Exit statuses of `agentd chat`. run and follow end with the chat's end, so
// that scripts can tell the outcomes apart.
const (
	exitCompleted = 0 // the chat completed (or the command succeeded)
	exitError     = 1 // the command failed: the server refused a request or could not be reached
	exitUsage     = 2 // bad command line
	exitFailed    = 3 // the chat failed
	exitCancelled = 4 // the chat was cancelled
)

const chatUsage = `usage: agentd chat <command> [flags] [arguments]

A client of an agentd server: AGENTD_URL (default http://127.0.0.1:8080)
and AGENTD_API_KEY (sent as a bearer key; never given on the command line).

commands:
  run FILE              create a chat from a spec file (- for stdin) and follow it
  ls                    list chats, newest first (--status, --limit, --cursor;
                        --meta KEY=VALUE, repeatable, --name NAME, --team TEAM)
  show ID               a chat and its messages
  follow ID             follow a chat's events until it ends (--after SEQ; --all:
                        across its runs, until interrupted)
  answer ID TEXT        answer a pending request for a human message
  answer ID --speaker NAME
                        pick the next speaker of a manual selection
  cancel ID             cancel a chat, and print it once it has ended
  again ID [TEXT]       run the chat again (a new task, or none: go on) and follow
                        that run (--enqueue or --interrupt when a run is active,
                        --max-round N, --to AGENT: hand a Swarm back to AGENT)
  stop ID               end the active run after its current turn
  fork ID [TEXT]        a new chat from this one's log (--at SEQ: up to there);
                        with TEXT its first run is TEXT
  approve ID            approve the held tool calls or code (--reject CALL_ID, or
                        --reject code, with --reason TEXT; --args CALL_ID=JSON edits)
  rm ID                 erase a chat that has ended, for good
  set ID                change a chat's context variables between runs and its
                        metadata: --var NAME=TEXT, --var-json NAME=JSON, --unset
                        NAME, --meta KEY=VALUE, --unmeta KEY (each repeatable)

flags (every command):
  --json                print JSON (one event per line for run and follow)
  --url URL             the server (default $AGENTD_URL)

run and follow exit with the chat's end: 0 completed, 3 failed, 4 cancelled;
1 when a request fails, 2 on a bad command line.
`

// chatCommand runs `agentd chat …`.
func chatCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, chatUsage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitCompleted
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("agentd chat "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	baseURL := fs.String("url", cmp.Or(getenv("AGENTD_URL"), "http://127.0.0.1:8080"), "")
	asJSON := fs.Bool("json", false, "")
	status := fs.String("status", "", "")
	limit := fs.Int("limit", 0, "")
	cursor := fs.String("cursor", "", "")
	after := fs.Int64("after", 0, "")
	speaker := fs.String("speaker", "", "")
	var ro runOptions
	ro.register(fs)
	var meta metaFlags
	fs.Var(&meta, "meta", "")
	name := fs.String("name", "", "")
	team := fs.String("team", "", "")
	var patch api.ChatPatch
	registerPatch(fs, &patch)
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, chatUsage)
		return exitCompleted
	}
	if err != nil {
		fmt.Fprintf(stderr, "agentd chat %s: %v\n\n%s", sub, err, chatUsage)
		return exitUsage
	}
	c, err := client.New(*baseURL, getenv("AGENTD_API_KEY"), nil)
	if err != nil {
		fmt.Fprintln(stderr, "agentd chat:", err)
		return exitUsage
	}
	out := &printer{w: stdout, json: *asJSON, colour: isTerminal(stdout) && getenv("NO_COLOR") == ""}
	want := func(n int, what string) bool {
		if len(pos) != n {
			fmt.Fprintf(stderr, "agentd chat %s: want %s\n\n%s", sub, what, chatUsage)
			return false
		}
		return true
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "agentd chat %s: %v\n", sub, err)
		return exitError
	}
	switch sub {
	case "run":
		if !want(1, "a spec file") {
			return exitUsage
		}
		spec, err := readSpec(pos[0])
		if err != nil {
			return fail(err)
		}
		ch, err := c.Create(ctx, spec)
		if err != nil {
			return fail(err)
		}
		if !out.json {
			fmt.Fprintf(stdout, "chat %s created; follow it with: agentd chat follow %s\n", ch.ID, ch.ID)
		}
		return follow(ctx, c, out, ch.ID, 0, stderr)
	case "follow":
		if !want(1, "a chat id") {
			return exitUsage
		}
		if ro.all {
			return followWith(ctx, c, out, pos[0], *after, client.FollowOptions{All: true}, stderr)
		}
		return follow(ctx, c, out, pos[0], *after, stderr)
	case "again", "stop", "fork", "approve":
		return runCommand(ctx, c, out, sub, pos, &ro, stdout, stderr)
	case "ls":
		if !want(0, "no arguments") {
			return exitUsage
		}
		l, err := c.List(ctx, client.ListParams{Status: *status, Limit: *limit, Cursor: *cursor, Metadata: meta, Name: *name, Team: *team})
		if err != nil {
			return fail(err)
		}
		out.list(l)
		return exitCompleted
	case "show":
		if !want(1, "a chat id") {
			return exitUsage
		}
		ch, err := c.Get(ctx, pos[0])
		if err != nil {
			return fail(err)
		}
		msgs, err := c.Messages(ctx, ch.ID)
		if err != nil {
			return fail(err)
		}
		out.show(ch, msgs)
		return exitCompleted
	case "answer":
		if *speaker == "" && !want(2, "a chat id and the text (or --speaker NAME)") ||
			*speaker != "" && !want(1, "a chat id (and --speaker NAME)") {
			return exitUsage
		}
		ch, err := c.Get(ctx, pos[0])
		if err != nil {
			return fail(err)
		}
		if ch.PendingInput == nil {
			return fail(fmt.Errorf("chat %s is %s and waits for no input", ch.ID, ch.Status))
		}
		var content, spk *string
		if *speaker != "" {
			spk = speaker
		} else {
			content = &pos[1]
		}
		ch, err = c.Input(ctx, ch.ID, ch.PendingInput.RequestID, content, spk)
		if err != nil {
			return fail(err)
		}
		out.chat(ch)
		return exitCompleted
	case "cancel":
		if !want(1, "a chat id") {
			return exitUsage
		}
		ch, err := c.Cancel(ctx, pos[0])
		if err != nil {
			return fail(err)
		}
		if ch, err = awaitEnd(ctx, c, ch, cancelWait); err != nil {
			return fail(err)
		}
		out.chat(ch)
		return exitCompleted
	case "set":
		if !want(1, "a chat id") {
			return exitUsage
		}
		for _, m := range meta {
			k, v, _ := strings.Cut(m, "=")
			setKey(&patch.Metadata, k, v)
		}
		if len(patch.Metadata) == 0 && len(patch.ContextVariables) == 0 {
			fmt.Fprintf(stderr, "agentd chat set: nothing to change: give --var, --var-json, --unset, --meta or --unmeta\n\n%s", chatUsage)
			return exitUsage
		}
		ch, err := c.Patch(ctx, pos[0], patch)
		if err != nil {
			return fail(err)
		}
		out.chat(ch)
		return exitCompleted
	case "rm":
		if !want(1, "a chat id") {
			return exitUsage
		}
		if err := c.Erase(ctx, pos[0]); err != nil {
			return fail(err)
		}
		if !out.json {
			fmt.Fprintf(stdout, "chat %s erased\n", pos[0])
		}
		return exitCompleted
	default:
		fmt.Fprintf(stderr, "agentd chat: unknown command %q\n\n%s", sub, chatUsage)
		return exitUsage
	}
}

// parseInterleaved parses flags that may come before, between or after the
// positional arguments ("answer ID --speaker NAME"); "--" ends the flags.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if len(args) > 0 && len(rest) < len(args) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

func readSpec(file string) ([]byte, error) {
	if file == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(file)
}

// follow prints a chat's events until it ends and returns the exit status
// of its end.
func follow(ctx context.Context, c *client.Client, out *printer, id string, after int64, stderr io.Writer) int {
	return followWith(ctx, c, out, id, after, client.FollowOptions{}, stderr)
}

// followWith is follow with options: across runs, or until a run's end.
func followWith(ctx context.Context, c *client.Client, out *printer, id string, after int64, opts client.FollowOptions, stderr io.Writer) int {
	end := ""
	err := c.FollowWith(ctx, id, after, opts, time.Second, func(e client.Event) error {
		out.event(id, e)
		if e.Terminal() {
			var d struct {
				Status string `json:"status"`
			}
			_ = json.Unmarshal(e.Data, &d)
			end = d.Status
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(stderr, "agentd chat: follow %s: %v\n", id, err)
		return exitError
	}
	if end == "" {
		// 204: the stream had nothing after the resume point; the chat's
		// status says how it ended.
		ch, err := c.Get(ctx, id)
		if err != nil {
			fmt.Fprintf(stderr, "agentd chat: %v\n", err)
			return exitError
		}
		end = string(ch.Status)
	}
	switch end {
	case "completed":
		return exitCompleted
	case "failed":
		return exitFailed
	case "cancelled":
		return exitCancelled
	}
	return exitError
}

// cancelWait bounds how long `agentd chat cancel` waits for the chat to
// end after the server recorded the cancel (202); a turn is cut at once, so
// it is short unless the chat's worker is away (its replica died: another
// takes the chat over within the lease).
const cancelWait = 30 * time.Second

// awaitEnd returns the chat once it has ended: ch itself if it has, else
// the chat as it is after the terminal event that follows ch.LastSeq on its
// stream (at most within), so a command prints the outcome and not the
// status it had while the request was under way.
func awaitEnd(ctx context.Context, c *client.Client, ch *client.Chat, within time.Duration) (*client.Chat, error) {
	switch ch.Status {
	case "completed", "failed", "cancelled":
		return ch, nil
	}
	wctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	err := c.Follow(wctx, ch.ID, ch.LastSeq, time.Second, func(client.Event) error { return nil })
	if err != nil && wctx.Err() == nil {
		return nil, fmt.Errorf("wait for chat %s to end: %w", ch.ID, err)
	}
	if err != nil {
		return nil, fmt.Errorf("chat %s has not ended %s after the cancel was recorded: %w", ch.ID, within, err)
	}
	return c.Get(ctx, ch.ID)
}

// printer writes what the commands show: JSON for scripts, or text for
// people (with a colour per agent on a terminal).
type printer struct {
	w      io.Writer
	json   bool
	colour bool
}

func (p *printer) raw(v json.RawMessage) {
	fmt.Fprintln(p.w, strings.TrimSpace(string(v)))
}

func (p *printer) paint(name, s string) string {
	if !p.colour {
		return s
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	colours := []int{31, 32, 33, 34, 35, 36, 91, 92, 93, 94, 95, 96}
	return fmt.Sprintf("\x1b[1;%dm%s\x1b[0m", colours[h.Sum32()%uint32(len(colours))], s)
}

func (p *printer) dim(s string) string {
	if !p.colour {
		return s
	}
	return "\x1b[2m" + s + "\x1b[0m"
}

func (p *printer) chat(ch *client.Chat) {
	if p.json {
		p.raw(ch.Raw)
		return
	}
	fmt.Fprintf(p.w, "chat %s  %s\n", ch.ID, deref(ch.Name))
	fmt.Fprintf(p.w, "  status     %s\n", ch.Status)
	if ch.StopReason != nil {
		fmt.Fprintf(p.w, "  stopped    %s: %s\n", *ch.StopReason, deref(ch.StopDetail))
	}
	if ch.Error != nil && *ch.Error != deref(ch.StopDetail) {
		// A failure's stop detail is usually its error: said once.
		fmt.Fprintf(p.w, "  error      %s\n", *ch.Error)
	}
	fmt.Fprintf(p.w, "  turns      %d, %d messages, last seq %d\n", ch.Turns, ch.MessageCount, ch.LastSeq)
	fmt.Fprintf(p.w, "  usage      %d prompt + %d completion tokens\n", ch.Usage.PromptTokens, ch.Usage.CompletionTokens)
	fmt.Fprintf(p.w, "  created    %s\n", ch.CreatedAt.Local().Format(time.DateTime))
	if ch.Team != nil {
		fmt.Fprintf(p.w, "  team       %s@%d\n", ch.Team.Name, ch.Team.Version)
	}
	if len(ch.Metadata) > 0 && string(ch.Metadata) != "null" {
		fmt.Fprintf(p.w, "  metadata   %s\n", ch.Metadata)
	}
	if len(ch.ContextVariables) > 0 && string(ch.ContextVariables) != "{}" {
		fmt.Fprintf(p.w, "  variables  %s\n", ch.ContextVariables)
	}
	if pi := ch.PendingInput; pi != nil {
		fmt.Fprintf(p.w, "  waiting    %s\n", pendingText(ch.ID, pi))
	}
}

func (p *printer) list(l *client.ChatList) {
	if p.json {
		p.raw(l.Raw)
		return
	}
	tw := tabwriter.NewWriter(p.w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tTURNS\tCREATED\tNAME")
	for _, c := range l.Chats {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", c.ID, c.Status, c.Turns, c.CreatedAt.Local().Format(time.DateTime), deref(c.Name))
	}
	tw.Flush()
	if l.NextCursor != nil {
		fmt.Fprintf(p.w, "more: agentd chat ls --cursor %s\n", *l.NextCursor)
	}
}

func (p *printer) show(ch *client.Chat, msgs []client.Message) {
	if p.json {
		raws := make([]json.RawMessage, len(msgs))
		for i, m := range msgs {
			raws[i] = m.Raw
		}
		b, _ := json.Marshal(struct {
			Chat     json.RawMessage   `json:"chat"`
			Messages []json.RawMessage `json:"messages"`
		}{ch.Raw, raws})
		p.raw(b)
		return
	}
	p.chat(ch)
	fmt.Fprintln(p.w)
	for _, m := range msgs {
		p.message(m)
	}
}

func (p *printer) message(m client.Message) {
	head := fmt.Sprintf("%s %s", p.dim(fmt.Sprintf("#%d", m.Seq)), p.paint(m.Name, m.Name))
	if m.Role != "assistant" {
		head += p.dim(" (" + m.Role + ")")
	}
	if m.Usage != nil {
		head += p.dim(fmt.Sprintf("  [%d+%d tokens]", m.Usage.PromptTokens, m.Usage.CompletionTokens))
	}
	fmt.Fprintln(p.w, head)
	if m.Content != "" {
		fmt.Fprintln(p.w, indentLines(m.Content, "  "))
	}
	for _, tc := range m.ToolCalls {
		fmt.Fprintf(p.w, "  → %s(%s)  %s\n", tc.Function.Name, tc.Function.Arguments, p.dim(tc.ID))
	}
	for _, tr := range m.ToolResponses {
		mark := "←"
		if tr.IsError {
			mark = "✗"
		}
		// The mark takes the first line's indent; the lines after it
		// line up under the first.
		fmt.Fprintf(p.w, "  %s %s  %s\n", mark, strings.TrimPrefix(indentLines(tr.Content, "    "), "    "), p.dim(tr.ToolCallID))
	}
	if r := m.CodeResult; r != nil && m.Content == "" {
		// The message's content already says the exit code and the output
		// ("exitcode: 0 (execution succeeded)\nCode output: …", as the
		// agents read it); the result is printed only when there is none.
		fmt.Fprintf(p.w, "  exit code %d\n%s\n", r.ExitCode, indentLines(r.Output, "  | "))
	}
	if m.Handoff != "" {
		fmt.Fprintf(p.w, "  ⇒ handoff to %s\n", m.Handoff)
	}
}

// event prints one event of a stream.
func (p *printer) event(chatID string, e client.Event) {
	if p.json {
		b, _ := json.Marshal(e)
		p.raw(b)
		return
	}
	switch e.Event {
	case "message":
		var m client.Message
		if json.Unmarshal(e.Data, &m) == nil {
			p.message(m)
		}
	case "speaker.selected":
		var d struct {
			Agent  string `json:"agent"`
			Method string `json:"method"`
			Turn   int    `json:"turn"`
		}
		_ = json.Unmarshal(e.Data, &d)
		fmt.Fprintln(p.w, p.dim(fmt.Sprintf("── turn %d: ", d.Turn))+p.paint(d.Agent, d.Agent)+p.dim(" speaks ("+d.Method+")"))
	case "input.requested":
		var pi client.PendingInput
		_ = json.Unmarshal(e.Data, &pi)
		fmt.Fprintln(p.w, "?? "+pendingText(chatID, &pi))
	case "message.delta":
		// Token deltas are shown by --json only: the message event that
		// follows carries the whole reply.
	case "run.started":
		var d struct {
			Run int `json:"run"`
		}
		_ = json.Unmarshal(e.Data, &d)
		fmt.Fprintln(p.w, p.dim(fmt.Sprintf("── run %d", d.Run)))
	case "chat.created", "chat.running":
		fmt.Fprintln(p.w, p.dim("── "+e.Event))
	case "context.updated":
		fmt.Fprintln(p.w, p.dim("── variables ")+contextChange(e.Data))
	default:
		if !e.Terminal() {
			// An event this client does not know: named, never taken
			// for the chat's end.
			fmt.Fprintln(p.w, p.dim("── "+e.Event))
			return
		}
		var d struct {
			Status     string `json:"status"`
			StopReason string `json:"stop_reason"`
			StopDetail string `json:"stop_detail"`
			Error      string `json:"error"`
		}
		_ = json.Unmarshal(e.Data, &d)
		line := fmt.Sprintf("== %s: %s — %s", d.Status, d.StopReason, d.StopDetail)
		if d.Error != "" && d.Error != d.StopDetail {
			line += "\n   error: " + d.Error
		}
		fmt.Fprintln(p.w, line)
	}
}

// contextChange is a context.updated event's change in one line: what was
// set, what removed, and by whom.
func contextChange(data json.RawMessage) string {
	var d struct {
		Set     json.RawMessage `json:"set"`
		Removed []string        `json:"removed"`
		By      struct {
			Agent  string `json:"agent"`
			Tool   string `json:"tool"`
			Client string `json:"client"`
		} `json:"by"`
	}
	_ = json.Unmarshal(data, &d)
	var parts []string
	if len(d.Set) > 0 && string(d.Set) != "{}" {
		parts = append(parts, "set "+string(d.Set))
	}
	if len(d.Removed) > 0 {
		parts = append(parts, "removed "+strings.Join(d.Removed, ", "))
	}
	by := d.By.Client
	if d.By.Agent != "" || d.By.Tool != "" {
		by = strings.Trim(d.By.Agent+" "+d.By.Tool, " ")
	}
	if by != "" {
		parts = append(parts, "(by "+by+")")
	}
	return strings.Join(parts, " ")
}

func pendingText(chatID string, pi *client.PendingInput) string {
	if pi.Kind == "approval" {
		var held []string
		for _, tc := range pi.ToolCalls {
			held = append(held, fmt.Sprintf("%s %s(%s)", tc.ID, tc.Function.Name, tc.Function.Arguments))
		}
		for _, b := range pi.CodeBlocks {
			held = append(held, fmt.Sprintf("%s code:\n%s", b.Language, indentLines(b.Code, "    ")))
		}
		return fmt.Sprintf("%s waits for approval of:\n  %s\napprove with: agentd chat approve %s (--reject CALL_ID|code --reason TEXT, --args CALL_ID=JSON)",
			pi.Agent, strings.Join(held, "\n  "), chatID)
	}
	if pi.Kind == "speaker" {
		return fmt.Sprintf("%s — pick one of %s: agentd chat answer %s --speaker NAME", pi.Reason, strings.Join(pi.Candidates, ", "), chatID)
	}
	return fmt.Sprintf("%s asks for a message (%s): agentd chat answer %s 'TEXT'", pi.Agent, pi.Reason, chatID)
}

func indentLines(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// isTerminal reports whether w is a character device (a terminal), where
// colours help; pipes and files get plain text.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// registerPatch adds the flags of `agentd chat set` that fill p: a
// variable's value is text with --var and any JSON with --var-json, so that
// the common case needs no quoting inside quotes; a JSON value is sent as
// written (a big integer stays exact). A removal is a null value.
func registerPatch(fs *flag.FlagSet, p *api.ChatPatch) {
	pair := func(flagName, s string) (string, string, error) {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return "", "", fmt.Errorf("--%s %q: want NAME=VALUE", flagName, s)
		}
		return k, v, nil
	}
	fs.Func("var", "", func(s string) error {
		k, v, err := pair("var", s)
		if err == nil {
			setKey(&p.ContextVariables, k, v)
		}
		return err
	})
	fs.Func("var-json", "", func(s string) error {
		k, v, err := pair("var-json", s)
		if err != nil {
			return err
		}
		if !json.Valid([]byte(v)) {
			return fmt.Errorf("--var-json %s: %q is not JSON (a text is --var %s=TEXT)", k, v, k)
		}
		setKey(&p.ContextVariables, k, json.RawMessage(v))
		return nil
	})
	remove := func(flagName string, m *map[string]any) func(string) error {
		return func(s string) error {
			if s == "" {
				return fmt.Errorf("--%s: want a name", flagName)
			}
			setKey(m, s, nil)
			return nil
		}
	}
	fs.Func("unset", "", remove("unset", &p.ContextVariables))
	fs.Func("unmeta", "", remove("unmeta", &p.Metadata))
}

// setKey sets (*m)[k], making the map on first use.
func setKey(m *map[string]any, k string, v any) {
	if *m == nil {
		*m = map[string]any{}
	}
	(*m)[k] = v
}
