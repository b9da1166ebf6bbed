package autogen_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/llm/openaitest"
)

// replyHeader carries the index of the script reply chosen for a request
// from scriptServer to openaitest's responder.
const replyHeader = "X-Golden-Reply"

// scriptServer is the model server of a golden run on agentd's side, as
// record.py's ScriptServer is on AgentChat's: each request gets the first
// remaining reply of the script addressed to its agent (agentOf) or to no
// one, held back by the reply's delay, and each request's arrival is logged
// with the earlier requests still unanswered when it came. openaitest
// writes the answers (and checks each request as the API does).
type scriptServer struct {
	fake    *openaitest.Server
	script  []scriptReply
	systems map[string]string
	// stop makes a client's stop request while request i is in flight.
	stop func(i int)

	mu         sync.Mutex
	used       []bool
	bodies     [][]byte
	open       [][]int
	unanswered map[int]bool
}

func newScriptServer(t *testing.T, sc scenario, spec []byte, stop func(i int)) *scriptServer {
	t.Helper()
	s := &scriptServer{fake: openaitest.New(), script: sc.Script, systems: agentSystems(t, spec), stop: stop,
		used: make([]bool, len(sc.Script)), unanswered: map[int]bool{}}
	t.Cleanup(s.fake.Close)
	known := map[string]bool{}
	for _, name := range s.systems {
		known[name] = true
	}
	replies := make([]openaitest.Reply, len(sc.Script))
	for i, r := range sc.Script {
		if r.Agent != "" && !known[r.Agent] {
			t.Fatalf("reply %d is addressed to %q, whose requests cannot be told apart (it needs a system_message no other agent has)", i, r.Agent)
		}
		reply := openaitest.Reply{Content: r.Content, Usage: r.Usage, Reasoning: r.ReasoningContent}
		if reply.Usage == nil {
			reply.Usage = &openaitest.Usage{PromptTokens: 10, CompletionTokens: 5}
		}
		for _, c := range r.ToolCalls {
			tc := openaitest.Call(c.Name, c.Arguments)
			tc.ID = c.ID
			reply.ToolCalls = append(reply.ToolCalls, tc)
		}
		replies[i] = reply
	}
	s.fake.Respond(func(req openaitest.Request) openaitest.Reply {
		k, err := strconv.Atoi(req.Header.Get(replyHeader))
		if err != nil || k < 0 || k >= len(replies) {
			t.Errorf("a model request without its script reply (%q)", req.Header.Get(replyHeader))
			return openaitest.Text("")
		}
		return replies[k]
	})
	return s
}

// ServeHTTP picks the request's reply, makes its stop request, waits its
// delay, counts the request answered and lets openaitest answer it. A
// request counts as answered before its response is written, as in
// record.py, so a request made after reading a response never finds that
// one open.
//
// Only a model call counts. The server's port was free a moment ago and
// may have been another test's, whose clients (a browser's event stream
// reconnecting, say) can still knock on it; their requests would take
// the script's replies.
func (s *scriptServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	agent := agentOf(body, s.systems)
	s.mu.Lock()
	i := len(s.bodies)
	s.bodies = append(s.bodies, body)
	var open []int
	for k := range s.unanswered {
		open = append(open, k)
	}
	sort.Ints(open)
	s.open = append(s.open, open)
	s.unanswered[i] = true
	k := -1
	for j, reply := range s.script {
		if !s.used[j] && (reply.Agent == "" || reply.Agent == agent) {
			s.used[j], k = true, j
			break
		}
	}
	s.mu.Unlock()
	answered := func() {
		s.mu.Lock()
		delete(s.unanswered, i)
		s.mu.Unlock()
	}
	if k < 0 {
		answered()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error": {"message": "script exhausted", "type": "invalid_request_error"}}`)
		return
	}
	reply := s.script[k]
	if reply.Stop {
		s.stop(i)
	}
	if reply.DelayMS > 0 {
		select {
		case <-time.After(time.Duration(reply.DelayMS) * time.Millisecond):
		case <-r.Context().Done():
			answered()
			return
		}
	}
	answered()
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.Header.Set(replyHeader, strconv.Itoa(k))
	s.fake.Handler().ServeHTTP(w, r)
}

// log is every request body so far in arrival order, and each one's open
// requests.
func (s *scriptServer) log() ([][]byte, [][]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.bodies), slices.Clone(s.open)
}

// count is the number of requests so far.
func (s *scriptServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}

// agentSystems maps the system_message of each agent of a spec that no
// other agent shares to the agent's name, as record.py's agent_systems.
func agentSystems(t *testing.T, spec []byte) map[string]string {
	t.Helper()
	var sp struct {
		Agents []struct {
			Name          string  `json:"name"`
			SystemMessage *string `json:"system_message"`
		} `json:"agents"`
	}
	if err := json.Unmarshal(spec, &sp); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, a := range sp.Agents {
		if a.SystemMessage != nil {
			count[*a.SystemMessage]++
		}
	}
	out := map[string]string{}
	for _, a := range sp.Agents {
		if a.SystemMessage != nil && count[*a.SystemMessage] == 1 {
			out[*a.SystemMessage] = a.Name
		}
	}
	return out
}

// systemOf is a request's first message's text when it is a system message.
func systemOf(body []byte) (string, bool) {
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil || len(req.Messages) == 0 || req.Messages[0].Role != "system" {
		return "", false
	}
	s, ok := req.Messages[0].Content.(string)
	return s, ok
}

// agentOf is the agent that made a request: the one whose system message
// the request starts with; "" when none does.
func agentOf(body []byte, systems map[string]string) string {
	if s, ok := systemOf(body); ok {
		return systems[s]
	}
	return ""
}

// compareConcurrent compares requests by the rule for concurrent ones
// (README.md): each agent's requests, in its order, must equal AgentChat's;
// two requests AgentChat made one after the other (the first answered
// before the second came) must be made by agentd in that order, the first
// answered before the second comes; two that overlapped in AgentChat must
// overlap in agentd, in either order. Agents are told apart by the system
// messages of AgentChat's requests.
func compareConcurrent(want fixture, got run) []string {
	if len(want.Arrivals) != len(want.Requests) {
		return []string{fmt.Sprintf("the fixture has %d arrivals for %d requests", len(want.Arrivals), len(want.Requests))}
	}
	if len(got.open) != len(got.requests) {
		return []string{fmt.Sprintf("agentd's log has %d arrivals for %d requests", len(got.open), len(got.requests))}
	}
	systems := map[string]string{}
	for i, a := range want.Arrivals {
		if s, ok := systemOf(want.Requests[i]); ok && a.Agent != "" {
			systems[s] = a.Agent
		}
	}
	wantBy, gotBy := map[string][]int{}, map[string][]int{}
	var agents []string
	for i, a := range want.Arrivals {
		if _, ok := wantBy[a.Agent]; !ok {
			agents = append(agents, a.Agent)
		}
		wantBy[a.Agent] = append(wantBy[a.Agent], i)
	}
	for i, b := range got.requests {
		a := agentOf(b, systems)
		if _, ok := wantBy[a]; !ok {
			if _, ok := gotBy[a]; !ok {
				agents = append(agents, a)
			}
		}
		gotBy[a] = append(gotBy[a], i)
	}
	name := func(a string) string {
		if a == "" {
			return "no known agent"
		}
		return a
	}
	var diffs []string
	// counterpart maps AgentChat's request i to agentd's of the same agent
	// and rank.
	counterpart := map[int]int{}
	for _, a := range agents {
		w, g := wantBy[a], gotBy[a]
		for k := 0; k < max(len(w), len(g)); k++ {
			switch {
			case k >= len(g):
				n, _ := normalize(want.Requests[w[k]])
				diffs = append(diffs, fmt.Sprintf("request %d of %s (AgentChat's request %d) missing; AgentChat sent:\n%s", k+1, name(a), w[k], n))
				continue
			case k >= len(w):
				n, _ := normalize(got.requests[g[k]])
				diffs = append(diffs, fmt.Sprintf("request %d of %s (agentd's request %d) extra; agentd sent:\n%s", k+1, name(a), g[k], n))
				continue
			}
			counterpart[w[k]] = g[k]
			wn, err1 := normalize(want.Requests[w[k]])
			gn, err2 := normalize(got.requests[g[k]])
			if err1 != nil || err2 != nil {
				diffs = append(diffs, fmt.Sprintf("request %d of %s: %v %v", k+1, name(a), err1, err2))
				continue
			}
			if wn != gn {
				diffs = append(diffs, fmt.Sprintf("request %d of %s (AgentChat's %d, agentd's %d) differs:\n%s", k+1, name(a), w[k], g[k], lineDiff(wn, gn)))
			}
		}
	}
	label := func(i int) string {
		a := want.Arrivals[i].Agent
		return fmt.Sprintf("%d (%s's request %d)", i, name(a), slices.Index(wantBy[a], i)+1)
	}
	overlap := func(open [][]int, i, j int) bool {
		if i > j {
			i, j = j, i
		}
		return slices.Contains(open[j], i)
	}
	wo := wantOpen(want)
	for j := range want.Requests {
		for i := 0; i < j; i++ {
			gi, ok1 := counterpart[i]
			gj, ok2 := counterpart[j]
			if !ok1 || !ok2 {
				continue
			}
			switch w, g := overlap(wo, i, j), overlap(got.open, gi, gj); {
			case w && !g:
				diffs = append(diffs, fmt.Sprintf("requests %s and %s were in flight together in AgentChat, one after the other in agentd", label(i), label(j)))
			case !w && g:
				diffs = append(diffs, fmt.Sprintf("request %s was answered before %s came in AgentChat; agentd had both in flight", label(i), label(j)))
			case !w && gi > gj:
				diffs = append(diffs, fmt.Sprintf("request %s came before %s in AgentChat, after it in agentd", label(i), label(j)))
			}
		}
	}
	return diffs
}

// wantOpen is the fixture's open requests of each request.
func wantOpen(want fixture) [][]int {
	out := make([][]int, len(want.Arrivals))
	for i, a := range want.Arrivals {
		out[i] = a.Open
	}
	return out
}

// TestGoldenComparisonOfConcurrentRequests checks the rule for concurrent
// requests: the arrival order of requests that were in flight together
// may differ, and nothing else may: what each agent sent, a parallel
// reply appended or seen out of order, parallel requests made one after
// the other, requests AgentChat made one after the other made together or
// in the other order.
func TestGoldenComparisonOfConcurrentRequests(t *testing.T) {
	_, want := load(t, "graph_parallel_then_again")
	// at is the index of agent's k-th request (from 1) in the fixture.
	at := func(agent string, k int) int {
		for i, a := range want.Arrivals {
			if a.Agent == agent {
				if k--; k == 0 {
					return i
				}
			}
		}
		t.Fatalf("the fixture has no request %d of %s", k, agent)
		return -1
	}
	b1, c1, b2, d1, a2, d2 := at("b", 1), at("c", 1), at("b", 2), at("d", 1), at("a", 2), at("d", 2)
	if !slices.Contains(want.Arrivals[max(b1, c1)].Open, min(b1, c1)) || !slices.Contains(want.Arrivals[b2].Open, c1) {
		t.Fatalf("the fixture's parallel requests did not overlap: %+v", want.Arrivals)
	}
	same := func() run {
		r := run{stop: want.StopReason, transcript: slices.Clone(want.Transcript)}
		for i, b := range want.Requests {
			r.requests = append(r.requests, slices.Clone([]byte(b)))
			r.open = append(r.open, slices.Clone(want.Arrivals[i].Open))
		}
		return r
	}
	if d := compare(want, same()); len(d) != 0 {
		t.Fatalf("a fixture differs from itself: %v", d)
	}
	// reorder puts the requests in the given arrival order, each pair
	// overlapping as before.
	reorder := func(r *run, order []int) {
		overlaps := map[[2]int]bool{}
		for j, open := range r.open {
			for _, i := range open {
				overlaps[[2]int{i, j}], overlaps[[2]int{j, i}] = true, true
			}
		}
		reqs, open := make([][]byte, len(order)), make([][]int, len(order))
		for q, j := range order {
			reqs[q] = r.requests[j]
			for p, i := range order[:q] {
				if overlaps[[2]int{i, j}] {
					open[q] = append(open[q], p)
				}
			}
		}
		r.requests, r.open = reqs, open
	}
	swapped := func(i, j int) []int {
		order := make([]int, len(want.Requests))
		for k := range order {
			order[k] = k
		}
		order[i], order[j] = order[j], order[i]
		return order
	}
	// swapMessages swaps the messages of request i whose contents are x
	// and y.
	swapMessages := func(i int, x, y string) func(*run) {
		return func(r *run) {
			var m map[string]any
			if err := json.Unmarshal(r.requests[i], &m); err != nil {
				t.Fatal(err)
			}
			msgs := m["messages"].([]any)
			find := func(s string) int {
				for k, x := range msgs {
					if x.(map[string]any)["content"] == s {
						return k
					}
				}
				t.Fatalf("request %d has no message %q", i, s)
				return -1
			}
			p, q := find(x), find(y)
			msgs[p], msgs[q] = msgs[q], msgs[p]
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			r.requests[i] = b
		}
	}
	const bReply, cReply = "12 bags of flour left.", "Flour is 2 euros a kilo."
	for _, tc := range []struct {
		name    string
		change  func(*run)
		noticed bool
	}{
		{"parallel requests arriving in the other order", func(r *run) { reorder(r, swapped(b1, c1)) }, false},
		{"parallel requests made one after the other", func(r *run) { r.open[max(b1, c1)] = nil }, true},
		{"a tool turn's second request not overlapping the sibling's", func(r *run) {
			r.open[b2] = slices.DeleteFunc(r.open[b2], func(i int) bool { return i == c1 })
		}, true},
		{"parallel replies appended in the other order", func(r *run) {
			k, l := slices.IndexFunc(r.transcript, func(e entry) bool { return e.Content == bReply }),
				slices.IndexFunc(r.transcript, func(e entry) bool { return e.Content == cReply })
			r.transcript[k], r.transcript[l] = r.transcript[l], r.transcript[k]
		}, true},
		{"a swapped parallel reply", func(r *run) {
			for i, e := range r.transcript {
				switch e.Content {
				case bReply:
					r.transcript[i].Content = cReply
				case cReply:
					r.transcript[i].Content = bReply
				}
			}
		}, true},
		{"the join seeing the parallel replies in the other order", swapMessages(d1, bReply, cReply), true},
		{"a parallel node seeing its sibling's reply before its own", swapMessages(at("b", 3), bReply, cReply), true},
		{"a request made while an earlier one AgentChat waited for was in flight", func(r *run) {
			r.open[a2] = append(r.open[a2], d1)
		}, true},
		{"requests AgentChat made one after the other in the other order", func(r *run) { reorder(r, swapped(d1, a2)) }, true},
		{"a request of an unknown agent", func(r *run) {
			r.requests[d2] = bytes.Replace(r.requests[d2], []byte("You decide: AGAIN"), []byte("You decide: again"), 1)
		}, true},
		{"a request fewer", func(r *run) { r.requests, r.open = r.requests[:len(r.requests)-1], r.open[:len(r.open)-1] }, true},
	} {
		r := same()
		tc.change(&r)
		if d := compare(want, r); (len(d) > 0) != tc.noticed {
			t.Errorf("%s: noticed %v, want %v (%v)", tc.name, len(d) > 0, tc.noticed, d)
		}
	}
}
