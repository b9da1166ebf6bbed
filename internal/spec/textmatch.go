package spec

import (
	"fmt"
	"regexp"
	"regexp/syntax"
)

// Bounds on text_match, so that no pattern costs more than milliseconds of
// CPU per message. Go's regexp (RE2) runs in time linear in the text, but
// the factor is the size of the compiled program, which counted
// repetitions multiply: (a{100}){100} is ten thousand instructions run per
// byte of text. So the pattern, its repetition counts and its compiled size
// are bounded, and so is the text one condition scans.
const (
	// MaxTextMatchPattern is the longest pattern, in bytes.
	MaxTextMatchPattern = 256
	// MaxTextMatchRepeat is the largest count of a counted repetition
	// ({n}, {n,m}).
	MaxTextMatchRepeat = 50
	// MaxTextMatchProgram is the most instructions a compiled pattern may
	// have.
	MaxTextMatchProgram = 100
	// MaxTextMatchScan is how much of a message's content a text_match
	// condition scans: its last 2 KiB, where a closing word like
	// TERMINATE is.
	MaxTextMatchScan = 2 << 10
)

// checkTextMatchPattern returns what is wrong with a text_match pattern, or
// "" when it is acceptable.
func CheckTextMatchPattern(pattern string) string {
	if len(pattern) > MaxTextMatchPattern {
		return fmt.Sprintf("is %d bytes long, the most allowed is %d", len(pattern), MaxTextMatchPattern)
	}
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return fmt.Sprintf("is not a valid RE2 pattern: %v", err)
	}
	if n := maxRepeat(re); n > MaxTextMatchRepeat {
		return fmt.Sprintf("repeats %d times, the most allowed is %d", n, MaxTextMatchRepeat)
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return fmt.Sprintf("is not a valid RE2 pattern: %v", err)
	}
	if len(prog.Inst) > MaxTextMatchProgram {
		return fmt.Sprintf("is too complex: it compiles to %d instructions, the most allowed is %d (use fewer or smaller repetitions)",
			len(prog.Inst), MaxTextMatchProgram)
	}
	if _, err := regexp.Compile(pattern); err != nil {
		return fmt.Sprintf("is not a valid RE2 pattern: %v", err)
	}
	return ""
}

// maxRepeat is the largest repetition count in re.
func maxRepeat(re *syntax.Regexp) int {
	n := 0
	if re.Op == syntax.OpRepeat {
		n = max(re.Min, re.Max)
	}
	for _, s := range re.Sub {
		n = max(n, maxRepeat(s))
	}
	return n
}
