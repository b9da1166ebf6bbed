package mcpserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/internal/chat"
)

// maxTranscriptEvents bounds the events one resource read goes through.
const maxTranscriptEvents = 100000

// listChats answers resources/list: the tenant's chats, newest first, a
// page at a time (the cursor is the chat list's).
func (ts *tenantServer) listChats(ctx context.Context, p *mcp.ListResourcesParams) (*mcp.ListResourcesResult, error) {
	cursor := ""
	if p != nil {
		cursor = p.Cursor
	}
	chats, next, err := ts.h.chats.List(ctx, &chat.ListChatsParams{Tenant: ts.tenant, Limit: resourcePage, Cursor: cursor})
	if err != nil {
		if errors.Is(err, chat.ErrInvalidCursor) {
			return nil, errors.New("invalid cursor: pass the nextCursor of the previous page")
		}
		ts.h.log.Error("mcp: list chats", "tenant", ts.tenant, "error", err)
		return nil, errors.New("internal error: the chats cannot be listed")
	}
	res := &mcp.ListResourcesResult{NextCursor: next, Resources: make([]*mcp.Resource, 0, len(chats))}
	for _, c := range chats {
		title := c.Name
		if c.Team != nil {
			title = fmt.Sprintf("%s (team %s v%d)", cmp.Or(c.Name, "chat"), c.Team.Name, c.Team.Version)
		}
		res.Resources = append(res.Resources, &mcp.Resource{URI: chatURIPrefix + c.ID, Name: c.ID, Title: title,
			Description: fmt.Sprintf("status %s, %d messages", c.Status, c.MessageCount), MIMEType: "text/plain"})
	}
	return res, nil
}

// readChat answers resources/read of agentd://chats/{id}: the chat's
// transcript, one "name: content" block per message.
func (ts *tenantServer) readChat(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	id, ok := strings.CutPrefix(uri, chatURIPrefix)
	if !ok || id == "" || strings.Contains(id, "/") {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	c, err := ts.h.chats.Get(ctx, ts.tenant, id)
	if errors.Is(err, chat.ErrNotFound) {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	if err != nil {
		ts.h.log.Error("mcp: read a chat", "chat_id", id, "error", err)
		return nil, errors.New("internal error: the chat cannot be read")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "chat %s: %s", c.ID, c.Status)
	if c.StopReason != "" {
		fmt.Fprintf(&b, " (%s)", c.StopReason)
	}
	b.WriteString("\n")
	var after int64
	for read := 0; read < maxTranscriptEvents; {
		evs, err := ts.h.chats.Events(ctx, ts.tenant, id, after, eventPage)
		if err != nil {
			ts.h.log.Error("mcp: read a chat's events", "chat_id", id, "error", err)
			return nil, errors.New("internal error: the chat cannot be read")
		}
		for _, e := range evs {
			after = e.Seq
			if m, ok := chat.MessageFromEvent(e); ok && m.Content != "" {
				fmt.Fprintf(&b, "\n%s (%s): %s\n", m.Name, m.Role, m.Content)
			}
		}
		read += len(evs)
		if len(evs) < eventPage {
			break
		}
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: b.String()}}}, nil
}
