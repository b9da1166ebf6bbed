package server

import (
	"net/http"
	"strings"
)

// includeSpecValue is the value of ?include= that adds the spec to chat
// objects. The parameter is a comma-separated list so that more optional
// parts can be added later without a new parameter.
const includeSpecValue = "spec"

// includeSpec reports whether the request asks for the chat's spec with
// ?include=spec. Chat objects leave the spec out by default: a client
// listing or polling chats would otherwise download every spec again and
// again, and the spec is the one part of a chat that never changes.
func (p *queryParser) includeSpec() bool {
	with := false
	for _, v := range p.q["include"] {
		for _, part := range strings.Split(v, ",") {
			switch strings.TrimSpace(part) {
			case includeSpecValue:
				with = true
			case "":
			default:
				p.problem("include", "must be a comma-separated list of: spec")
			}
		}
	}
	return with
}

// includeSpec parses ?include= alone, for handlers without other query
// parameters.
func includeSpec(r *http.Request) (bool, error) {
	q := newQueryParser(r)
	with := q.includeSpec()
	return with, q.err()
}
