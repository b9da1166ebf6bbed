package runtime

import (
	"runtime"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/spec"
)

// Chats whose stored specs are the same bytes share one decoded spec, for as
// long as any of them holds it; a spec that does not decode is not shared.
func TestSpecShare(t *testing.T) {
	s := newSpecShare()
	raw := []byte(`{"task":"t","agents":[{"name":"a","type":"assistant","model":"m"}],"models":{"m":{"provider":"replay","responses":["hi"]}}}`)
	a, err := s.decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.decode(append([]byte(nil), raw...))
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("the same stored spec was decoded twice")
	}
	if a.Task.Text != "t" || len(a.Agents) != 1 || a.Models["m"].Responses[0].Content != "hi" {
		t.Fatalf("decoded spec = %+v", a)
	}
	other, err := s.decode([]byte(`{"task":"u"}`))
	if err != nil || other == a || other.Task.Text != "u" {
		t.Fatalf("another spec: %+v, %v", other, err)
	}

	bad1, err1 := s.decode([]byte(`{"task":1}`))
	bad2, err2 := s.decode([]byte(`{"task":1}`))
	if err1 == nil || err2 == nil || bad1 == nil || bad1 == bad2 {
		t.Fatalf("a spec that does not decode: %p %v, %p %v", bad1, err1, bad2, err2)
	}

	// What Create decoded is what the worker gets.
	mine := &spec.Spec{Task: spec.TextTask("mine")}
	key := [32]byte{1}
	if got := s.share(key, mine); got != mine {
		t.Fatal("share did not keep the first spec")
	}
	if got := s.share(key, &spec.Spec{Task: spec.TextTask("mine")}); got != mine {
		t.Fatal("share replaced a spec still in use")
	}
	runtime.KeepAlive(mine)

	// Once no chat holds a spec, it and its entry go.
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		s.mu.Lock()
		n := len(s.m)
		s.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d entries left after their specs were collected", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
