package engine

import (
	"strings"
	"testing"

	"github.com/agentd/agentd/internal/chat"
)

func TestExtractCodeBlocks(t *testing.T) {
	text := "Here:\n```python\nprint(1)\n```\nand\n``` bash \necho hi\n```\nuntagged:\n```\nrm -rf /\n```\n```js\nconsole.log(1)\n```\n```py\nx = 2\nprint(x)\n```"
	got := extractCodeBlocks(text)
	want := []CodeBlock{
		{"python", "python", "print(1)"}, {"sh", "bash", "echo hi"}, {"", "", "rm -rf /"}, {"", "js", "console.log(1)"}, {"python", "py", "x = 2\nprint(x)"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d blocks %+v", len(got), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("block %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestRunnableBlocksSinceTheAgentsLastTurn(t *testing.T) {
	msgs := []chat.Message{
		{Name: "coder", Content: "```python\nprint('old')\n```"},
		{Name: "executor", Content: "exitcode: 0"},
		{Name: "coder", Content: "```python\nprint('new')\n```\n```\nuntagged\n```"},
		{Name: "reviewer", Content: "also\n```shell\necho yes\n```"},
	}
	got := runnableBlocks(msgs, "executor", nil)
	if len(got) != 2 || got[0].Code != "print('new')" || got[1].Code != "echo yes" {
		t.Fatalf("runnable = %+v", got)
	}
	if got := runnableBlocks(msgs, "executor", []string{"sh"}); len(got) != 1 || got[0].Language != "sh" {
		t.Fatalf("sh only = %+v", got)
	}
	if got := runnableBlocks(msgs, "nobody", nil); len(got) != 3 {
		t.Fatalf("an agent that never spoke sees every block: %+v", got)
	}
}

func FuzzExtractCodeBlocks(f *testing.F) {
	f.Add("```python\nprint(1)\n```")
	f.Add("``````\n\n```")
	f.Add("```sh\r\necho\r\n```")
	f.Fuzz(func(t *testing.T, text string) {
		for _, b := range extractCodeBlocks(text) {
			if !strings.Contains(text, b.Code) {
				t.Fatalf("block %q is not part of the text", b.Code)
			}
			if b.Language != "" && b.Language != "python" && b.Language != "sh" {
				t.Fatalf("language %q", b.Language)
			}
		}
	})
}
