package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/llm/openaitest"
)

// galleryTeams are the teams of AutoGen Studio's default gallery (the team
// files a new AutoGen Studio user starts from), by label, as AutoGen's
// python-v0.7.5 tag has them (e2e/autogen/components/gallery.sh).
func galleryTeams(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "internal", "component", "testdata", "gallery", "default_gallery.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Components struct {
			Teams []json.RawMessage `json:"teams"`
		} `json:"components"`
	}
	mustUnmarshal(t, b, &g)
	teams := map[string]json.RawMessage{}
	for _, raw := range g.Components.Teams {
		var head struct{ Label string }
		mustUnmarshal(t, raw, &head)
		teams[head.Label] = raw
	}
	if len(teams) != 4 {
		t.Fatalf("the gallery has %d teams, want 4", len(teams))
	}
	return teams
}

// TestAutoGenStudioGalleryTeamsLoad: three of the gallery's four teams are
// accepted as they are; the fourth, whose MultimodalWebSurfer drives a
// browser on the host, is a 422 naming that agent.
func TestAutoGenStudioGalleryTeamsLoad(t *testing.T) {
	t.Parallel()
	p := startAgentd(t, "AGENTD_DATA_DIR="+t.TempDir(), "OPENAI_API_KEY=sk-test", "OPENAI_BASE_URL=http://127.0.0.1:9/v1")
	for label, team := range galleryTeams(t) {
		code, _, body := p.do("POST", "/v1/chats", teamBody(t, "What is 12 * 7?", team, ""))
		switch label {
		case "Web Agent Team (Operator)":
			if code != http.StatusUnprocessableEntity ||
				!problemSays(t, body, "/team/config/participants/0/provider", "autogen_ext.agents.web_surfer.MultimodalWebSurfer") {
				t.Errorf("%s: %d %s, want a 422 naming the web surfer", label, code, body)
			}
		case "RoundRobin Team", "Selector Team", "Deep Research Team":
			if code != http.StatusCreated {
				t.Errorf("%s: %d %s", label, code, body)
			}
		default:
			t.Errorf("a team the test does not know: %q", label)
		}
	}
}

// TestAutoGenStudioDeepResearchTeam runs the gallery's "Deep Research Team"
// unchanged, on both sandbox backends: its selector and agents answer from
// a scripted OpenAI-wire model; its research assistant's two FunctionTools
// run in the chat's sandbox with their own imports (httpx, bs4, html2text).
// fetch_webpage fetches a page of a local stand-in for the web, which the
// operator and the request allow, through agentd's egress proxy, and turns
// it into the markdown AgentChat's run of the tool gives; google_search
// needs a Google API key the sandbox does not have and is an error result,
// after which the chat goes on: the verifier approves, the summary agent
// reports and says TERMINATE.
func TestAutoGenStudioDeepResearchTeam(t *testing.T) {
	t.Parallel()
	team := galleryTeams(t)["Deep Research Team"]
	var schemas struct {
		Cases []struct{ Name, Schema string }
	}
	b, err := os.ReadFile(filepath.Join("..", "internal", "pyfunc", "testdata", "agentchat_schemas.json"))
	if err != nil {
		t.Fatal(err)
	}
	mustUnmarshal(t, b, &schemas)
	agentChatSchema := map[string]string{}
	for _, c := range schemas.Cases {
		agentChatSchema[strings.TrimPrefix(c.Name, "gallery_")] = c.Schema
	}

	sandboxes(t, func(t *testing.T, env []string) {
		var fetched atomic.Int32
		web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/research/page.html" {
				http.NotFound(w, r)
				return
			}
			fetched.Add(1)
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, `<html><head><title>Egress report</title><style>body{color:red}</style><script>var x = 1;</script></head>
<body><h1>Sandbox egress</h1><p>agentd lets a sandbox reach <b>allowed</b> hosts only, through its own proxy.</p>
<p>See <a href="/details.html">the details</a>.</p><img src="chart.png" alt="chart"></body></html>`)
		}))
		defer web.Close()
		host := fmt.Sprintf("127.0.0.1:%d", web.Listener.Addr().(*net.TCPAddr).Port)
		page := "http://" + host + "/research/page.html"

		model := openaitest.New(openaitest.WithAPIKey("sk-gallery"))
		defer model.Close()
		model.Reply(
			openaitest.Text("research_assistant"),
			openaitest.Reply{ToolCalls: []openaitest.ToolCall{
				{Function: openaitest.FunctionCall{Name: "google_search", Arguments: new(`{"query": "agentd sandbox egress"}`)}},
				{Function: openaitest.FunctionCall{Name: "fetch_webpage", Arguments: new(mustJSON(t, map[string]any{"url": page}))}},
			}},
			openaitest.Text("verifier"),
			openaitest.Text("- Progress Assessment: the page answers the question.\n- Next Steps or Final Summary: report. APPROVED"),
			openaitest.Text("summary_agent"),
			openaitest.Text("# Sandbox egress\n\nA sandbox reaches allowed hosts only, through agentd's proxy [1].\n\n[1] "+page+"\n\nTERMINATE"),
		)
		p := startAgentd(t, append(env, "AGENTD_DATA_DIR="+t.TempDir(),
			"OPENAI_API_KEY=sk-gallery", "OPENAI_BASE_URL="+model.URL(),
			"AGENTD_SANDBOX_ALLOW_HOSTS="+host)...)
		c := p.createTeam(teamBody(t, "How does agentd let a sandbox reach the web?", team,
			`, "sandbox": {"network": {"allow": [`+mustJSON(t, host)+`]}}`))
		final := p.waitTerminal(c.ID, 3*time.Minute)
		if final.Status != "completed" || final.StopDetail == nil || *final.StopDetail != "Text 'TERMINATE' mentioned" {
			t.Fatalf("chat = %+v", final)
		}

		var speakers []string
		var results []string
		var errs []bool
		for _, m := range p.typedMessages(c.ID) {
			speakers = append(speakers, m.Type+":"+m.Name)
			for _, r := range m.ToolResponses {
				results = append(results, r.Content)
				errs = append(errs, r.IsError)
			}
		}
		if want := "TextMessage:user ToolCallRequestEvent:research_assistant ToolCallExecutionEvent:research_assistant ToolCallSummaryMessage:research_assistant TextMessage:verifier TextMessage:summary_agent"; strings.Join(speakers, " ") != want {
			t.Errorf("messages = %s\nwant       %s", strings.Join(speakers, " "), want)
		}
		if len(results) != 2 {
			t.Fatalf("tool results = %q", results)
		}
		if !errs[0] || !strings.Contains(results[0], "Missing required environment variables. Please set GOOGLE_API_KEY and GOOGLE_CSE_ID.") {
			t.Errorf("google_search = %q (error %v), want its own error without a key", results[0], errs[0])
		}
		// What the tool gives with Debian's bs4 and html2text (the
		// sandbox image's and the host's): script and style gone, links
		// and images made absolute, emphasis kept.
		want := "# Sandbox egress\n\nagentd lets a sandbox reach **allowed** hosts only, through its own proxy.\n\n" +
			"See [the details](http://" + host + "/details.html).\n\n![chart](http://" + host + "/research/chart.png)"
		if errs[1] || results[1] != want {
			t.Errorf("fetch_webpage = %q (error %v)\nwant %q", results[1], errs[1], want)
		}
		if n := fetched.Load(); n != 1 {
			t.Errorf("the local web served the page %d times, want 1", n)
		}

		// The research assistant was shown both tools with the schemas
		// AgentChat derives from their signatures.
		reqs := model.Requests()
		if len(reqs) != 6 {
			t.Fatalf("%d model requests, want 6", len(reqs))
		}
		tools := reqs[1].Chat.Tools
		if len(tools) != 2 {
			t.Fatalf("the research assistant's tools = %+v", tools)
		}
		for _, tool := range tools {
			if got, want := string(tool.Function.Parameters), agentChatSchema[tool.Function.Name]; got != want {
				t.Errorf("%s's parameters = %s\nAgentChat's       %s", tool.Function.Name, got, want)
			}
		}
		metrics := p.scrape()
		if !strings.Contains(metrics, `agentd_sandbox_egress_connections_total{outcome="allowed"} 1`) {
			t.Error("the egress proxy did not count the page's connection")
		}
	})
}
