package engine

import (
	"unicode/utf8"

	"github.com/agentd/agentd/internal/spec"
)

// textMatchScope is the part of content a text_match condition scans: at
// most its last MaxTextMatchScan bytes, cut at a character boundary.
func textMatchScope(content string) string {
	if len(content) <= spec.MaxTextMatchScan {
		return content
	}
	s := content[len(content)-spec.MaxTextMatchScan:]
	for i := 0; i < utf8.UTFMax && len(s) > 0 && !utf8.RuneStart(s[0]); i++ {
		s = s[1:]
	}
	return s
}
