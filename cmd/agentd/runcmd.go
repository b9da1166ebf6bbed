package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/agentd/agentd/internal/client"
)

// runOptions are the flags of the run commands of `agentd chat`.
type runOptions struct {
	enqueue, interrupt, all bool
	maxRound                int
	to                      string
	at                      int64
	reject                  listFlag
	reason                  string
	edits                   listFlag
}

func (o *runOptions) register(fs *flag.FlagSet) {
	fs.BoolVar(&o.enqueue, "enqueue", false, "")
	fs.BoolVar(&o.interrupt, "interrupt", false, "")
	fs.BoolVar(&o.all, "all", false, "")
	fs.IntVar(&o.maxRound, "max-round", 0, "")
	fs.StringVar(&o.to, "to", "", "")
	fs.Int64Var(&o.at, "at", 0, "")
	fs.Var(&o.reject, "reject", "")
	fs.StringVar(&o.reason, "reason", "", "")
	fs.Var(&o.edits, "args", "")
}

// listFlag is a flag that may be given more than once.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// runCommand runs again, stop, fork and approve.
func runCommand(ctx context.Context, c *client.Client, out *printer, sub string, pos []string, o *runOptions, stdout, stderr io.Writer) int {
	usage := func(what string) int {
		fmt.Fprintf(stderr, "agentd chat %s: %s\n\n%s", sub, what, chatUsage)
		return exitUsage
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "agentd chat %s: %v\n", sub, err)
		return exitError
	}
	if len(pos) == 0 || len(pos) > 2 || sub != "again" && sub != "fork" && len(pos) != 1 {
		return usage("want a chat id" + map[bool]string{true: " and, optionally, the text of the task", false: ""}[sub == "again" || sub == "fork"])
	}
	id := pos[0]
	switch sub {
	case "again":
		if o.enqueue && o.interrupt {
			return usage("--enqueue and --interrupt exclude each other")
		}
		r := client.RunRequest{MaxRound: o.maxRound, Task: task(pos, o.to)}
		switch {
		case o.enqueue:
			r.IfBusy = "enqueue"
		case o.interrupt:
			r.IfBusy = "interrupt"
		}
		ch, err := c.Run(ctx, id, r)
		if err != nil {
			return fail(err)
		}
		if !out.json {
			fmt.Fprintf(stdout, "run %d of chat %s posted\n", ch.PostedRun, ch.ID)
		}
		return followWith(ctx, c, out, ch.ID, ch.LastSeq, client.FollowOptions{UntilRun: ch.PostedRun}, stderr)
	case "stop":
		ch, err := c.Stop(ctx, id)
		if err != nil {
			return fail(err)
		}
		out.chat(ch)
		return exitCompleted
	case "fork":
		var r *client.RunRequest
		if t := task(pos, o.to); t != nil || o.maxRound > 0 {
			r = &client.RunRequest{Task: t, MaxRound: o.maxRound}
		}
		ch, err := c.Fork(ctx, id, o.at, r)
		if err != nil {
			return fail(err)
		}
		out.chat(ch)
		return exitCompleted
	default: // approve
		ch, err := c.Get(ctx, id)
		if err != nil {
			return fail(err)
		}
		p := ch.PendingInput
		if p == nil || p.Kind != "approval" {
			return fail(fmt.Errorf("chat %s is %s and holds nothing for approval", ch.ID, ch.Status))
		}
		as, err := decisions(p, o)
		if err != nil {
			return usage(err.Error())
		}
		if ch, err = c.Approve(ctx, id, p.RequestID, as); err != nil {
			return fail(err)
		}
		out.chat(ch)
		return exitCompleted
	}
}

// task is the task of a run: the text, as a HandoffMessage to `to` when
// set; nil for none.
func task(pos []string, to string) any {
	text := ""
	if len(pos) == 2 {
		text = pos[1]
	}
	switch {
	case to != "":
		return client.TaskMessage{Type: "HandoffMessage", Source: "user", Target: to, Content: text}
	case len(pos) == 2:
		return text
	}
	return nil
}

// decisions are the approvals of a held request: every call approved but
// those rejected (--reject CALL_ID), with the edits given (--args
// CALL_ID=JSON); held code is approved, or rejected with --reject code.
func decisions(p *client.PendingInput, o *runOptions) ([]client.Approval, error) {
	if len(p.CodeBlocks) > 0 {
		if len(o.edits) > 0 {
			return nil, fmt.Errorf("code is approved or rejected as it is: --args is for tool calls")
		}
		return []client.Approval{{Approve: len(o.reject) == 0, Reason: o.reason}}, nil
	}
	edits := map[string]json.RawMessage{}
	for _, e := range o.edits {
		callID, args, ok := strings.Cut(e, "=")
		if !ok || !json.Valid([]byte(args)) {
			return nil, fmt.Errorf("--args %q: want CALL_ID=JSON", e)
		}
		edits[callID] = json.RawMessage(args)
	}
	var as []client.Approval
	for _, tc := range p.ToolCalls {
		if slices.Contains(o.reject, tc.ID) {
			as = append(as, client.Approval{ToolCallID: tc.ID, Approve: false, Reason: o.reason})
			continue
		}
		as = append(as, client.Approval{ToolCallID: tc.ID, Approve: true, Arguments: edits[tc.ID]})
	}
	return as, nil
}
