package spec

import "strings"

// languageAliases maps the tags AutoGen accepts to the language that runs them.
var languageAliases = map[string]string{
	"python": "python", "py": "python", "python3": "python",
	"sh": "sh", "bash": "sh", "shell": "sh",
}

// CanonicalLanguage returns the language a tag runs as, or "".
func CanonicalLanguage(tag string) string {
	return languageAliases[strings.ToLower(tag)]
}

// HandoffPrefix names the generated handoff tools: transfer_to_<agent>.
const HandoffPrefix = "transfer_to_"
