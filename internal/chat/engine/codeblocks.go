package engine

import (
	"regexp"
	"slices"

	"github.com/agentd/agentd/internal/chat"

	"github.com/agentd/agentd/internal/spec"
)

// CodeBlock is one fenced block of a message.
type CodeBlock struct {
	Language string // canonical: python or sh; "" when untagged
	Tag      string // as written
	Code     string
}

// codeBlockRE is AutoGen's CODE_BLOCK_PATTERN: an opening fence with an
// optional language tag alone on its line, the code, and a closing fence on
// a line of its own.
var codeBlockRE = regexp.MustCompile("(?s)```[ \\t]*([\\w+.-]*)[ \\t]*\\r?\\n(.*?)\\r?\\n[ \\t]*```")

// extractCodeBlocks returns the fenced blocks of text in order.
func extractCodeBlocks(text string) []CodeBlock {
	var out []CodeBlock
	for _, m := range codeBlockRE.FindAllStringSubmatch(text, -1) {
		out = append(out, CodeBlock{Language: spec.CanonicalLanguage(m[1]), Tag: m[1], Code: m[2]})
	}
	return out
}

// runnableBlocks are the blocks a code-executing user_proxy runs: from the
// messages since its own last message, in order, only those tagged with one
// of its languages (default python and sh). Untagged blocks and other
// languages are not executed, as in AutoGen.
func runnableBlocks(msgs []chat.Message, agent string, languages []string) []CodeBlock {
	allowed := []string{"python", "sh"}
	if len(languages) > 0 {
		allowed = allowed[:0]
		for _, l := range languages {
			allowed = append(allowed, spec.CanonicalLanguage(l))
		}
	}
	start := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Name == agent {
			start = i + 1
			break
		}
	}
	var out []CodeBlock
	for _, m := range msgs[start:] {
		for _, b := range extractCodeBlocks(m.Content) {
			if b.Language != "" && slices.Contains(allowed, b.Language) {
				out = append(out, b)
			}
		}
	}
	return out
}
