package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentd/agentd/internal/chat"
)

// toolPrefix starts the name of every team tool.
const toolPrefix = "run_"

// chatURIPrefix starts the URI of every chat resource.
const chatURIPrefix = "agentd://chats/"

// tenantServer is one tenant's MCP server, its sessions and its tools.
type tenantServer struct {
	h      *Handler
	tenant string
	server *mcp.Server
	http   *mcp.StreamableHTTPHandler

	// syncMu makes one sync at a time; versions is the team version each
	// tool was made from, by team name.
	syncMu   sync.Mutex
	versions map[string]int
	// resync is set while a sync asked for by another replica's save
	// waits to start (syncSoon): saves in a burst make one sync, not one
	// each.
	resync atomic.Bool
}

func newTenantServer(h *Handler, tenant string) *tenantServer {
	ts := &tenantServer{h: h, tenant: tenant, versions: map[string]int{}}
	ts.server = mcp.NewServer(&mcp.Implementation{Name: "agentd", Title: "agentd teams", Version: h.cfg.Version}, &mcp.ServerOptions{
		Instructions: "Each tool runs one of the saved agentd teams on a task and returns the team's final message; " +
			"the chat it ran in is a resource (" + chatURIPrefix + "{id}) holding the whole transcript.",
		Logger: h.log,
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{},
		},
		InitializedHandler: func(context.Context, *mcp.InitializedRequest) { h.metrics.sessions.Inc() },
	})
	ts.server.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: chatURIPrefix + "{id}", Name: "chat",
		Title: "A chat's transcript", MIMEType: "text/plain"}, ts.readChat)
	ts.server.AddReceivingMiddleware(ts.middleware)
	ts.http = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		// A new session: its first tools/list is answered from the
		// teams as they are now (see middleware).
		return ts.server
	}, &mcp.StreamableHTTPOptions{
		SessionTimeout:      h.cfg.SessionTimeout,
		MaxRequestBodyBytes: h.cfg.MaxBodyBytes,
		// The HTTP layer already refuses hosts and origins it does not
		// serve (DNS rebinding, cross-origin pages), with the names an
		// operator allowed; the SDK's own check knows none of them and
		// would refuse a load balancer's forwarded requests.
		DisableLocalhostProtection: true,
	})
	return ts
}

// middleware answers tools/list from the saved teams as they are now,
// and resources/list from the tenant's chats.
func (ts *tenantServer) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/list":
			if err := ts.sync(ctx); err != nil {
				ts.h.log.Error("mcp: sync tools with saved teams", "tenant", ts.tenant, "error", err)
				return nil, errors.New("internal error: the saved teams cannot be read")
			}
		case "resources/list":
			p, _ := req.GetParams().(*mcp.ListResourcesParams)
			return ts.listChats(ctx, p)
		}
		return next(ctx, method, req)
	}
}

// syncSoon syncs the tools on a goroutine of its own, unless a sync is
// already waiting to start: it is called from the store's listener, which
// must not wait for the teams' read.
func (ts *tenantServer) syncSoon() {
	if !ts.resync.CompareAndSwap(false, true) {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
		defer cancel()
		ts.syncMu.Lock()
		ts.resync.Store(false) // a save from now on needs a sync after this one
		ts.syncMu.Unlock()
		if err := ts.sync(ctx); err != nil {
			ts.h.log.Error("mcp: sync tools with teams saved on another replica", "tenant", ts.tenant, "error", err)
		}
	}()
}

// syncTimeout bounds a sync that another replica's save asked for.
const syncTimeout = 30 * time.Second

// sync makes the tools those of the tenant's saved teams, at their latest
// versions; the SDK notifies the sessions when they change.
func (ts *tenantServer) sync(ctx context.Context) error {
	ts.syncMu.Lock()
	defer ts.syncMu.Unlock()
	want := map[string]*chat.Team{}
	cursor := ""
	for {
		teams, next, err := ts.h.chats.ListTeams(ctx, &chat.ListTeamsParams{Tenant: ts.tenant, Limit: maxTeams, Cursor: cursor})
		if err != nil {
			return err
		}
		for _, t := range teams {
			if len(want) < maxTeams {
				want[t.Name] = t
			}
		}
		if next == "" || len(want) >= maxTeams {
			break
		}
		cursor = next
	}
	var gone []string
	for name := range ts.versions {
		if want[name] == nil {
			gone = append(gone, toolPrefix+name)
			delete(ts.versions, name)
		}
	}
	if len(gone) > 0 {
		ts.server.RemoveTools(gone...)
	}
	for name, t := range want {
		if ts.versions[name] == t.Version {
			continue
		}
		ts.versions[name] = t.Version
		ts.server.AddTool(teamTool(t), ts.runTeam(name))
	}
	return nil
}

// teamTool is the tool of a saved team.
func teamTool(t *chat.Team) *mcp.Tool {
	var sp struct {
		Agents []struct {
			Name string `json:"name"`
		} `json:"agents"`
	}
	_ = json.Unmarshal(t.Spec, &sp)
	names := make([]string, len(sp.Agents))
	for i, a := range sp.Agents {
		names[i] = a.Name
	}
	desc := fmt.Sprintf("Run the agentd team %q (version %d) on a task: its agents (%s) work on it until the team ends, "+
		"and the team's final message is the result. The chat's id is in the structured content; "+
		"its transcript is the resource %s<chat_id>.", t.Name, t.Version, strings.Join(names, ", "), chatURIPrefix)
	return &mcp.Tool{
		Name: toolPrefix + t.Name, Title: "Run team " + t.Name, Description: desc,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"task":{"type":"string","description":"The task for the team."}},"required":["task"],"additionalProperties":false}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"chat_id":{"type":"string"},"status":{"type":"string"},"stop_reason":{"type":"string"},` +
			`"final_message":{"type":"string"},"final_speaker":{"type":"string"}},"required":["chat_id","status"]}`),
		Annotations: &mcp.ToolAnnotations{OpenWorldHint: ptr(true)},
	}
}

func ptr[T any](v T) *T { return &v }
