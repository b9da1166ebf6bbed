package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// command runs the binary under test with args against p.
func (p *proc) command(args ...string) (stdout, stderr string, code int) {
	p.t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(cliEnv(), "AGENTD_URL="+p.base)
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

// exitUsageCode is agentd's exit status for a bad command line.
const exitUsageCode = 2
