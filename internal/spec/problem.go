package spec

import (
	"fmt"
	"strings"

	"github.com/agentd/agentd/internal/spec/problem"
)

// ValidationError lists every problem found in a request, each with a JSON
// pointer to the offending value. The HTTP layer answers 422.
type ValidationError struct {
	Problems []Problem
}

// Problem is one validation failure: internal/spec/problem collects them.
type Problem = problem.Problem

func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("invalid chat spec:")
	for _, p := range e.Problems {
		fmt.Fprintf(&b, " %s: %s;", p.Path, p.Message)
	}
	return strings.TrimSuffix(b.String(), ";")
}
