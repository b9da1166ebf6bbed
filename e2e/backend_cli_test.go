package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// command runs the binary under test with args against p.
func (p *proc) command(args ...string) (stdout, stderr string, code int) {
	p.t.Helper()
	return p.commandEnv(nil, args...)
}

// commandEnv is command with env added to the CLI's environment.
func (p *proc) commandEnv(env []string, args ...string) (stdout, stderr string, code int) {
	p.t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(append(cliEnv(), "AGENTD_URL="+p.base), env...)
	cmd.Dir = ".."
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		p.t.Fatalf("agentd %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// TestChatLsMetaRmAndTeamCommands drives `agentd chat ls --meta`, `agentd
// chat rm` and `agentd team put|ls|show` against the real server.
func TestChatLsMetaRmAndTeamCommands(t *testing.T) {
	t.Parallel()
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none")
	c := p.create(readExample(t, "debate.json")) // metadata {"example": "debate"}
	other := p.create(readExample(t, "random-brainstorm.json"))
	p.waitTerminal(c.ID, 60*time.Second)

	out, errOut, code := p.command("chat", "ls", "--meta", "example=debate", "--json")
	if code != 0 || !strings.Contains(out, c.ID) || strings.Contains(out, other.ID) {
		t.Errorf("chat ls --meta example=debate: exit %d\n%s%s", code, out, errOut)
	}
	out, _, code = p.command("chat", "ls", "--meta", "example=debate", "--meta", "example=nope")
	if code != 0 || strings.Contains(out, c.ID) {
		t.Errorf("chat ls with a filter nothing matches listed %s", out)
	}
	if _, errOut, code := p.command("chat", "ls", "--meta", "novalue"); code != exitUsageCode || !strings.Contains(errOut, "KEY=VALUE") {
		t.Errorf("chat ls --meta novalue: exit %d %s", code, errOut)
	}

	out, errOut, code = p.command("chat", "rm", c.ID)
	if code != 0 || !strings.Contains(out, "erased") {
		t.Fatalf("chat rm: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := p.command("chat", "show", c.ID); code != 1 || !strings.Contains(errOut, "404") {
		t.Errorf("chat show of an erased chat: exit %d %s", code, errOut)
	}
	if _, errOut, code := p.command("chat", "rm", c.ID); code != 1 || !strings.Contains(errOut, "404") {
		t.Errorf("second chat rm: exit %d %s", code, errOut)
	}

	var spec map[string]json.RawMessage
	mustUnmarshal(t, readExample(t, "debate.json"), &spec)
	delete(spec, "task")
	b, _ := json.Marshal(spec)
	file := writeSpec(t, string(b))
	out, errOut, code = p.command("team", "put", "debate", file)
	if code != 0 || !strings.Contains(out, "team debate version 1") {
		t.Fatalf("team put: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := p.command("team", "put", "debate", "examples/debate.json"); code != 1 || !strings.Contains(errOut, "/task") {
		t.Errorf("team put of a spec with a task: exit %d %s", code, errOut)
	}
	out, _, code = p.command("team", "ls")
	if code != 0 || !strings.Contains(out, "debate") || !strings.Contains(out, "NAME") {
		t.Errorf("team ls: exit %d %s", code, out)
	}
	out, errOut, code = p.command("team", "show", "debate@1", "--json")
	var tv teamView
	if code != 0 || json.Unmarshal([]byte(out), &tv) != nil || tv.Name != "debate" || tv.Version != 1 || !strings.Contains(string(tv.Spec), "proponent") {
		t.Errorf("team show debate@1: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := p.command("team", "show", "nope"); code != 1 || !strings.Contains(errOut, "404") {
		t.Errorf("team show of an unknown team: exit %d %s", code, errOut)
	}
	// The chat from the team shows it.
	created, _, _ := p.do("POST", "/v1/chats", []byte(`{"team_ref": "debate", "task": "Tabs?"}`))
	if created != 201 {
		t.Fatalf("create from the team: %d", created)
	}
	ids := p.listIDs("team=debate")
	if len(ids) != 1 {
		t.Fatalf("chats of the team: %v", ids)
	}
	out, _, code = p.command("chat", "show", ids[0])
	if code != 0 || !strings.Contains(out, "team       debate@1") {
		t.Errorf("chat show of a chat from a team:\n%s", out)
	}
}

// TestChatSetCommand drives `agentd chat set` against the real server:
// variables as text and as JSON (a big integer stays exact), removals, and
// metadata, in one PATCH; the chat object the server keeps shows them.
func TestChatSetCommand(t *testing.T) {
	t.Parallel()
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none")
	c := p.create(readExample(t, "debate.json")) // metadata {"example": "debate"}
	p.waitTerminal(c.ID, 60*time.Second)

	out, errOut, code := p.command("chat", "set", c.ID, "--var", "tier=gold", "--var-json", `limits={"n": 12345678901234567890}`,
		"--var", "gone=soon", "--meta", "state=escalated", "--unmeta", "example")
	if code != 0 || !strings.Contains(out, `variables  {"gone":"soon","limits":{"n":12345678901234567890},"tier":"gold"}`) {
		t.Fatalf("chat set: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := p.command("chat", "set", c.ID, "--unset", "gone", "--var-json", "tier=3"); code != 0 {
		t.Fatalf("chat set --unset: exit %d %s", code, errOut)
	}
	got := p.get(c.ID)
	if string(got.ContextVariables) != `{"limits":{"n":12345678901234567890},"tier":3}` || string(got.Metadata) != `{"state":"escalated"}` {
		t.Errorf("after chat set: variables %s, metadata %s", got.ContextVariables, got.Metadata)
	}

	for _, bad := range [][]string{
		{"chat", "set", c.ID},
		{"chat", "set", c.ID, "--var-json", "x=nope"},
		{"chat", "set", c.ID, "--var", "=v"},
	} {
		if _, errOut, code := p.command(bad...); code != exitUsageCode {
			t.Errorf("%v: exit %d, want %d: %s", bad, code, exitUsageCode, errOut)
		}
	}
	if _, errOut, code := p.command("chat", "set", c.ID, "--var-json", `deep=`+strings.Repeat("[", 40)+strings.Repeat("]", 40)); code != 1 || !strings.Contains(errOut, "422") {
		t.Errorf("a value over the nesting limit: exit %d %s", code, errOut)
	}
}

// exitUsageCode is agentd's exit status for a bad command line.
const exitUsageCode = 2

// TestConsoleBackendFeatures drives the console in a headless Chromium:
// the list filtered by metadata, a chat deleted from its page, the teams.
func TestConsoleBackendFeatures(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none")
	debate := p.create(readExample(t, "debate.json"))                // metadata {"example": "debate"}
	brainstorm := p.create(readExample(t, "random-brainstorm.json")) // no metadata
	p.waitTerminal(debate.ID, 60*time.Second)
	var spec map[string]json.RawMessage
	mustUnmarshal(t, readExample(t, "debate.json"), &spec)
	delete(spec, "task")
	body, _ := json.Marshal(spec)
	if code, _, resp := p.do("PUT", "/v1/teams/debate", body); code != 201 {
		t.Fatalf("put team: %d %s", code, resp)
	}

	row := func(id string) string {
		return fmt.Sprintf(`document.querySelector('#chat-list li[data-id="%s"]')`, id)
	}
	b.run(chromedp.Navigate(p.base + "/"))
	b.waitJS("both chats listed", row(debate.ID)+" && "+row(brainstorm.ID))
	b.run(chromedp.SetValue(chromedp.CSS("#meta-filter"), "example=debate"))
	eval[any](b, `document.querySelector('#meta-form').requestSubmit()`)
	b.waitJS("the list filtered by metadata", row(debate.ID)+" && !"+row(brainstorm.ID))
	if shown := eval[string](b, row(debate.ID)+`.innerText`); !strings.Contains(shown, "example=debate") {
		t.Errorf("the list entry does not show the metadata: %q", shown)
	}
	b.screenshot("metadata-filter")
	b.run(chromedp.SetValue(chromedp.CSS("#meta-filter"), "no-equals-sign"))
	eval[any](b, `document.querySelector('#meta-form').requestSubmit()`)
	b.waitJS("the filter's error", `!document.querySelector('#meta-error').hidden`)

	// Delete, with the confirmation click.
	b.openChat(p.base, debate.ID)
	b.waitJS("the delete button", `document.querySelector('#erase') && !document.querySelector('#erase').hidden`)
	b.run(chromedp.Click(chromedp.CSS("#erase")))
	b.waitJS("the confirmation", `document.querySelector('#erase').dataset.confirm === 'yes'`)
	if code, _, _ := p.do("GET", "/v1/chats/"+debate.ID, nil); code != 200 {
		t.Fatalf("one click erased the chat (%d)", code)
	}
	// The confirmation lasts 5 s, which a loaded machine can spend between
	// two clicks of the test: confirm on the page in one step, arming the
	// button again if the confirmation ran out.
	b.waitJS("the confirmed delete", `(() => {
		const e = document.querySelector('#erase');
		const armed = e.dataset.confirm === 'yes';
		e.click();
		return armed;
	})()`)
	b.waitJS("back to the start page", `location.hash === '#/'`)
	if code, _, _ := p.do("GET", "/v1/chats/"+debate.ID, nil); code != 404 {
		t.Errorf("after delete the chat answers %d, want 404", code)
	}
	b.waitJS("the chat gone from the list", "!"+row(debate.ID))

	// A chat that has not ended cannot be deleted from its page.
	waiting := p.create(readExample(t, "manual-selection.json"))
	b.openChat(p.base, waiting.ID)
	b.waitJS("the waiting chat", `document.querySelector('#chat-status') && document.querySelector('#chat-status').textContent === 'awaiting_input'`)
	if !eval[bool](b, `document.querySelector('#erase').hidden`) {
		t.Error("a chat that has not ended offers Delete")
	}

	// The teams list.
	b.run(chromedp.Click(chromedp.CSS("#teams-link")))
	b.waitJS("the teams table", `document.querySelector('#team-rows tr[data-team="debate"][data-version="1"]')`)
	if shown := eval[string](b, `document.querySelector('#team-rows tr[data-team="debate"]').innerText`); !strings.Contains(shown, "proponent") {
		t.Errorf("the team row does not name its agents: %q", shown)
	}
	b.screenshot("teams")
	b.sameOrigin(p)
}
