// Command check runs a small program against agentd with the client that
// oapi-codegen generates from api/openapi.yaml with default flags (into
// ./agentd, not committed): create a chat and wait for it, list chats, read
// its messages, and get a 422. It fails to compile if the generated types do
// not fit, and exits 1 if the server does not fit the types.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"agentd-client-check/agentd"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("go client: ok")
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := os.Getenv("AGENTD_URL")
	if base == "" {
		base = "http://127.0.0.1:8080"
	}
	c, err := agentd.NewClientWithResponses(base)
	if err != nil {
		return err
	}
	file := "../../../examples/debate.json"
	if len(os.Args) > 1 {
		file = os.Args[1]
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var spec agentd.ChatSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return fmt.Errorf("decode %s as ChatSpec: %w", file, err)
	}

	// The request body is a spec or an AgentChat team (oneOf), which the
	// generated union type does not marshal by itself: send the JSON as it
	// is and keep the typed responses.
	wait := 30
	created, err := c.CreateChatWithBodyWithResponse(ctx, &agentd.CreateChatParams{WaitS: &wait}, "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	ch := created.JSON201
	if ch == nil {
		return fmt.Errorf("create: %d %s", created.StatusCode(), created.Body)
	}
	if ch.Status != agentd.StatusCompleted || ch.StopReason == nil || *ch.StopReason != agentd.StopReasonTextMention {
		return fmt.Errorf("chat %s ended %s %v", ch.Id, ch.Status, ch.StopReason)
	}
	if ch.Metadata == nil || (*ch.Metadata)["example"] != "debate" {
		return fmt.Errorf("metadata %v", ch.Metadata)
	}

	list, err := c.ListChatsWithResponse(ctx, &agentd.ListChatsParams{})
	if err != nil {
		return err
	}
	if list.JSON200 == nil || len(list.JSON200.Chats) == 0 || list.JSON200.Chats[0].Id != ch.Id {
		return fmt.Errorf("list: %d %s", list.StatusCode(), list.Body)
	}

	after := int64(0)
	msgs, err := c.ListMessagesWithResponse(ctx, ch.Id, &agentd.ListMessagesParams{After: &after})
	if err != nil {
		return err
	}
	if msgs.JSON200 == nil || len(msgs.JSON200.Messages) != ch.MessageCount || msgs.JSON200.LastSeq != ch.LastSeq {
		return fmt.Errorf("messages: %d %s", msgs.StatusCode(), msgs.Body)
	}
	// The task is a string, a message or a list (oneOf): this spec's is a
	// string.
	task, err := spec.Task.AsSpecTask0()
	if err != nil {
		return fmt.Errorf("the spec's task is not a string: %w", err)
	}
	if m := msgs.JSON200.Messages[0]; m.Content != task || m.Role != agentd.RoleUser {
		return fmt.Errorf("first message %+v", m)
	}

	bad := `{"task": "", "agents": [{"name": "1x", "type": "assistant", "model": "nope"}]}`
	invalid, err := c.CreateChatWithBodyWithResponse(ctx, nil, "application/json", strings.NewReader(bad))
	if err != nil {
		return err
	}
	p := invalid.ApplicationproblemJSON422
	if p == nil || len(p.Errors) == 0 {
		return fmt.Errorf("invalid spec: %d %s", invalid.StatusCode(), invalid.Body)
	}
	found := false
	for _, e := range p.Errors {
		found = found || e.Path == "/agents/0/name"
	}
	if !found {
		return fmt.Errorf("no problem at /agents/0/name: %s", invalid.Body)
	}

	// The event schemas are generated, not pruned.
	var ev agentd.ChatCompletedEvent
	if err := json.Unmarshal([]byte(`{"id": 9, "event": "chat.completed", "data": {"status": "completed", "stop_reason": "text_mention", "stop_detail": "x"}}`), &ev); err != nil || ev.Data.Status != agentd.StatusCompleted {
		return fmt.Errorf("event: %v %+v", err, ev)
	}
	return nil
}
