package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentd/agentd/internal/chat"
)

// savedTeams is the chat service of a store whose teams another replica
// saves: addTeam changes what ListTeams returns, and nothing else here
// hears of it; lists counts the reads.
type savedTeams struct {
	Chats
	mu    sync.Mutex
	teams []*chat.Team
	lists atomic.Int32
}

func (s *savedTeams) ListTeams(context.Context, *chat.ListTeamsParams) ([]*chat.Team, string, error) {
	s.lists.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.teams), "", nil
}

func (s *savedTeams) addTeam(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.teams = append(s.teams, &chat.Team{Name: name, Version: 1, Spec: json.RawMessage(`{"agents": [{"name": "a"}]}`)})
}

// TestTeamSavedElsewhereChangesTheTools: a team the store's notifications
// tell of (TeamSaved, for its tenant or for every tenant) is a tool the
// tenant's sessions are told about, and a burst of notifications reads
// the teams a few times, not once each.
func TestTeamSavedElsewhereChangesTheTools(t *testing.T) {
	t.Parallel()
	for _, tenant := range []string{"acme", ""} {
		name := tenant
		if name == "" {
			name = "every tenant"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			chats := &savedTeams{}
			chats.addTeam("first")
			h, err := New(Config{}, chats, nil, prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r, "acme") }))
			defer srv.Close()
			changed := make(chan struct{}, 10)
			client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
			})
			ctx, session := listedSession(t, client, srv.URL)
			defer session.Close()
			wait := func(after string) {
				t.Helper()
				select {
				case <-changed:
				case <-ctx.Done():
					t.Fatalf("no tools/list_changed %s", after)
				}
			}
			wait("after the first listing") // its tools were made then

			chats.addTeam("second")
			before := chats.lists.Load()
			for range 50 {
				h.TeamSaved(tenant)
			}
			h.TeamSaved("other") // a tenant without sessions: nothing to do
			wait("after the team was saved elsewhere")
			if n := chats.lists.Load() - before; n > 10 {
				t.Errorf("50 notifications read the teams %d times", n)
			}
			// The session's own listing reads them again: the tool is there.
			res, err := session.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range res.Tools {
				names = append(names, tl.Name)
			}
			if slices.Sort(names); !slices.Equal(names, []string{"run_first", "run_second"}) {
				t.Errorf("tools %v", names)
			}
		})
	}
}
