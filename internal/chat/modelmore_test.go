package chat

import (
	"testing"
	"unsafe"
)

// A model request carries the chat's whole history on every call: a
// field that most messages leave empty belongs in ModelMore.
func TestModelMessageStaysSmall(t *testing.T) {
	if n := unsafe.Sizeof(ModelMessage{}); n > 96 {
		t.Errorf("ModelMessage is %d bytes, want at most 96: put a field few messages have in ModelMore", n)
	}
}

// DropParts leaves a More it shares with another message as it was, and
// keeps the rest of it.
func TestDropPartsChangesOnlyItsCopy(t *testing.T) {
	more := &ModelMore{Parts: []ContentPart{{Text: "a"}}, Sender: "Sales"}
	a := ModelMessage{Role: RoleUser, More: more}
	b := a
	b.DropParts()
	if len(a.Parts()) != 1 || len(more.Parts) != 1 {
		t.Errorf("the shared More lost its parts: %+v", more)
	}
	if b.Parts() != nil || b.Sender() != "Sales" {
		t.Errorf("after DropParts: parts %v, sender %q; want none and Sales", b.Parts(), b.Sender())
	}
	c := ModelMessage{Role: RoleUser, More: MoreParts([]ContentPart{{Text: "a"}})}
	c.DropParts()
	if c.More != nil {
		t.Errorf("a More with only parts stays after DropParts: %+v", c.More)
	}
	if MoreParts(nil) != nil || MoreThinking(nil) != nil {
		t.Error("MoreParts or MoreThinking of nothing is not nil")
	}
}
