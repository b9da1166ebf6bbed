package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestDryRun: ?dry_run=true answers what a create or a team save would run
// or store, or its 422, and leaves nothing: no chat, no team version, no
// Idempotency-Key record.
func TestDryRun(t *testing.T) {
	t.Parallel()
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "AGENTD_SANDBOX=none")
	type dryRun struct {
		Spec     map[string]json.RawMessage `json:"spec"`
		Warnings []struct{ Path, Message string }
	}
	dry := func(method, path string, body []byte, header ...string) dryRun {
		t.Helper()
		code, _, resp := p.do(method, path, body, header...)
		if code != 200 {
			t.Fatalf("%s %s: %d %s", method, path, code, resp)
		}
		conforms(t, "DryRun", resp)
		var d dryRun
		mustUnmarshal(t, resp, &d)
		return d
	}

	// A spec, with an Idempotency-Key that a dry run does not record: the
	// same key then creates a chat from another body (no 409).
	d := dry("POST", "/v1/chats?dry_run=true", readExample(t, "debate.json"), "Idempotency-Key", "dry-1")
	if string(d.Spec["name"]) != `"tabs-vs-spaces-debate"` || len(d.Warnings) != 0 {
		t.Errorf("dry run of the debate: %+v", d)
	}
	created := p.create(readExample(t, "random-brainstorm.json"), "Idempotency-Key", "dry-1")

	// A team file: its translation and warnings.
	team := fmt.Appendf(nil, `{"task": "Reverse a string.", "team": %s}`, readExample(t, "agentchat-team.json"))
	d = dry("POST", "/v1/chats?dry_run=true", team)
	if string(d.Spec["task"]) != `"Reverse a string."` || !strings.Contains(string(d.Spec["agents"]), `"coder"`) {
		t.Errorf("dry run of the team file: %s", d.Spec)
	}
	// A problem in a team file is at its place in the file, as for a create.
	bad := strings.Replace(string(team), "autogen_agentchat.conditions.MaxMessageTermination", "example.NoSuchTermination", 1)
	code, _, resp := p.do("POST", "/v1/chats?dry_run=true", []byte(bad))
	if code != 422 || !strings.Contains(string(resp), `"path":"/team/config/termination_condition`) {
		t.Errorf("dry run of a broken team file: %d %s", code, resp)
	}

	// Saving a team: checked, not stored; then stored, and a team_ref
	// create resolved.
	var spec map[string]json.RawMessage
	mustUnmarshal(t, readExample(t, "debate.json"), &spec)
	delete(spec, "task")
	teamSpec, _ := json.Marshal(spec)
	d = dry("PUT", "/v1/teams/debate?dry_run=true", teamSpec)
	if _, ok := d.Spec["agents"]; !ok {
		t.Errorf("dry run of a team: %s", d.Spec)
	}
	if code, _, _ := p.do("GET", "/v1/teams/debate", nil); code != 404 {
		t.Errorf("after a dry run the team exists: %d", code)
	}
	code, _, resp = p.do("PUT", "/v1/teams/debate?dry_run=true", []byte(`{"task": "x", "agents": []}`))
	if code != 422 || !strings.Contains(string(resp), `"/task"`) {
		t.Errorf("dry run of a team with a task: %d %s", code, resp)
	}
	if code, _, resp := p.do("PUT", "/v1/teams/debate", teamSpec); code != 201 {
		t.Fatalf("save the team: %d %s", code, resp)
	}
	d = dry("POST", "/v1/chats?dry_run=true", []byte(`{"team_ref": "debate", "task": "Tabs or spaces?"}`))
	if string(d.Spec["task"]) != `"Tabs or spaces?"` || string(d.Spec["name"]) != `"tabs-vs-spaces-debate"` {
		t.Errorf("dry run of a team_ref: %s", d.Spec)
	}

	// Only the one real create made a chat.
	code, _, resp = p.do("GET", "/v1/chats", nil)
	var list struct {
		Chats []chatView `json:"chats"`
	}
	mustUnmarshal(t, resp, &list)
	if code != 200 || len(list.Chats) != 1 || list.Chats[0].ID != created.ID {
		t.Errorf("chats after the dry runs: %d %s", code, resp)
	}
}
