package component

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/agentd/agentd/internal/spec"
	"github.com/agentd/agentd/internal/spec/problem"
)

// teamKey is the request field that holds a team component.
const teamKey = "team"

// fromTeam are the spec fields a team determines; a request with a team
// may not set them besides.
var fromTeam = []string{"agents", "models", "tools", "speaker_selection", "termination"}

// Request is a POST /v1/chats body in the team form, translated.
type Request struct {
	// Spec is the chat spec to create, as JSON: the request's own
	// top-level options (task, name, max_round, metadata, sandbox, ...)
	// with the team's agents, tools, selection and termination.
	Spec []byte
	// Translation is the team's translation, for its warnings and for
	// MapProblems.
	Translation *Translation
}

// ParseRequest reads a POST /v1/chats body. It returns nil (and no error)
// for a body without a "team" field: a native spec, decoded elsewhere. A
// team that cannot be translated is a *spec.ValidationError listing every
// problem. The body must already be known to hold one JSON value.
//
// eps maps the team's model clients onto the server's endpoints (see
// FromTeam).
func ParseRequest(body []byte, eps Endpoints) (*Request, error) {
	if !mayHoldKey(body, teamKey) {
		return nil, nil // nearly every request: no decode just to find no team
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		return nil, nil // not an object: the spec decoder reports it
	}
	team, ok := top[teamKey]
	if !ok {
		return nil, nil
	}
	var probs problem.List
	for _, k := range fromTeam {
		if _, set := top[k]; set {
			probs.Add(problem.Key("", k), "comes from the team: leave it out of a request with team")
		}
	}
	tr, teamProbs := FromTeam("/"+teamKey, team, eps)
	probs.AddAll("", teamProbs)
	if probs.Len() > 0 {
		return nil, &spec.ValidationError{Problems: probs.Items()}
	}
	delete(top, teamKey)
	set := func(k string, v any) {
		b, err := marshal(v)
		if err != nil {
			panic(err) // spec types always encode
		}
		top[k] = b
	}
	set("agents", tr.Agents)
	if len(tr.Tools) > 0 {
		set("tools", tr.Tools)
	}
	if tr.SpeakerSelection != nil {
		set("speaker_selection", tr.SpeakerSelection)
	}
	if tr.Termination != nil {
		set("termination", tr.Termination)
	}
	if _, given := top["name"]; !given && tr.Name != "" {
		set("name", tr.Name)
	}
	switch _, given := top["max_round"]; {
	case given:
		delete(tr.paths, "/max_round")
	case tr.MaxRound != nil:
		set("max_round", *tr.MaxRound)
	default:
		def := (&spec.Spec{SpeakerSelection: tr.SpeakerSelection}).DefaultMaxRound()
		tr.Warnings = append(tr.Warnings, Warning{Path: "/team/config/max_turns",
			Message: fmt.Sprintf("not set: AgentChat would run until a termination condition fires; agentd stops after max_round turns (default %d, capped by the server); set max_turns or max_round", def)})
	}
	spec, err := marshal(top)
	if err != nil {
		return nil, err
	}
	return &Request{Spec: spec, Translation: tr}, nil
}

// marshal encodes without escaping <, > and & (prompts are full of them),
// so that the stored spec reads like the file it came from.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// mayHoldKey reports whether a JSON body could have an object key k (plain
// ASCII letters): it does unless k appears nowhere in it and no \u escape
// could spell it.
func mayHoldKey(body []byte, k string) bool {
	return bytes.Contains(body, []byte(k)) || bytes.Contains(body, []byte(`\u`))
}
