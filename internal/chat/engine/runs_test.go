package engine

import (
	"slices"
	"testing"

	"github.com/agentd/agentd/internal/spec"
)

// TestCheckRun: the check of a posted run against the chat's spec and the
// limits reports its own problems with those decoding found, in the
// body's order (fields by name, a task's messages by index), and a
// message decoding could not read is not checked again.
func TestCheckRun(t *testing.T) {
	t.Parallel()
	sp, _, probs := spec.DecodeCompact([]byte(`{"task": "t", "speaker_selection": {"method": "swarm"},
		"agents": [{"name": "alice", "type": "assistant", "model": {"provider": "replay", "responses": ["x"]}}]}`))
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	limits := spec.Limits{MaxRound: 10, MaxTaskBytes: 8}
	req := spec.DecodeRunRequest([]byte(`{"task": [
		{"type": "TextMessage", "source": "alice", "content": "x"},
		{"type": "Note", "content": "y"},
		{"type": "HandoffMessage", "target": "bob", "content": "z"},
		{"type": "TextMessage", "content": "far too long"},
		{"type": "HandoffMessage", "source": "alice", "target": 7, "content": "w"}],
		"max_round": 11}`))
	_, got := CheckRun(req, sp, limits)
	var paths []string
	for _, p := range got {
		paths = append(paths, p.Path)
	}
	want := []string{"/max_round", "/task/0/source", "/task/1/type", "/task/2/target", "/task/3/content", "/task/4/target"}
	if !slices.Equal(paths, want) {
		t.Errorf("problems at %q, want %q: %v", paths, want, got)
	}

	// max_round 0 is out of range, not the chat's own.
	if _, got := CheckRun(spec.DecodeRunRequest([]byte(`{"max_round": 0}`)), sp, limits); len(got) != 1 || got[0].Path != "/max_round" {
		t.Errorf("max_round 0: %v", got)
	}

	q, got := CheckRun(spec.DecodeRunRequest([]byte(`{"task": {"type": "HandoffMessage", "target": "alice", "content": "go"}, "max_round": 10}`)), sp, limits)
	if len(got) > 0 || q.MaxRound != 10 || len(q.Task) != 1 || q.Task[0].Target != "alice" {
		t.Errorf("a good run: %+v %v", q, got)
	}
}

// TestCheckRunMagentic: a magentic_one run needs a task, unless the one it
// has is already reported wrong.
func TestCheckRunMagentic(t *testing.T) {
	t.Parallel()
	sp, _, probs := spec.DecodeCompact([]byte(`{"task": "t", "speaker_selection": {"method": "magentic_one", "model": {"provider": "replay", "responses": ["x"]}},
		"agents": [{"name": "alice", "type": "assistant", "model": {"provider": "replay", "responses": ["x"]}}]}`))
	if len(probs) > 0 {
		t.Fatal(probs)
	}
	for body, want := range map[string]string{
		`{}`:                   magenticNeedsTask,
		`{"task": null}`:       magenticNeedsTask,
		`{"task": []}`:         "a list of task messages cannot be empty (leave task out to continue without a new message)",
		`{"task": [{"x": 1}]}`: "",
	} {
		_, got := CheckRun(spec.DecodeRunRequest([]byte(body)), sp, spec.Limits{})
		at := ""
		for _, p := range got {
			if p.Path == "/task" {
				at = p.Message
			}
		}
		if at != want {
			t.Errorf("%s: the problem at /task is %q, want %q (%v)", body, at, want, got)
		}
	}
}
