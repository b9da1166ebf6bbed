package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/internal/llm/openaitest"
	"github.com/agentd/agentd/internal/store/pgtest"
)

// typist follows a chat's events as a client that shows replies being
// typed: it reconnects with Last-Event-ID when its stream is cut, keeps
// the text of the reply in progress (a reset drops it) and records every
// persisted event.
type typist struct {
	p    *proc
	id   string
	mu   sync.Mutex
	text strings.Builder
	// voided is the text the last reset dropped.
	voided     string
	resets     int
	deltas     int
	events     []sseEvent
	reconnects int
	changed    chan struct{} // a value after each event (coalesced)
	// opened is closed once the first event came.
	opened chan struct{}
}

func newTypist(p *proc, id string) *typist {
	return &typist{p: p, id: id, changed: make(chan struct{}, 1), opened: make(chan struct{})}
}

// run follows the chat until its terminal event or ctx ends.
func (ty *typist) run(ctx context.Context) {
	var last int64
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, "GET", ty.p.base+"/v1/chats/"+ty.id+"/events", nil)
		if last > 0 {
			req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			if err == nil {
				resp.Body.Close()
			}
			time.Sleep(200 * time.Millisecond)
			ty.mu.Lock()
			ty.reconnects++
			ty.mu.Unlock()
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "" && ev.Type != "":
				if ty.take(ev) {
					resp.Body.Close()
					return
				}
				if ev.ID > 0 {
					last = ev.ID
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.ID, _ = strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
			case strings.HasPrefix(line, "event: "):
				ev.Type = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.Data = []byte(strings.TrimPrefix(line, "data: "))
			}
		}
		resp.Body.Close()
		ty.mu.Lock()
		ty.reconnects++
		ty.mu.Unlock()
	}
}

// take records one event; true after the terminal one.
func (ty *typist) take(ev sseEvent) bool {
	ty.mu.Lock()
	defer func() {
		ty.mu.Unlock()
		select {
		case ty.changed <- struct{}{}:
		default:
		}
	}()
	if ev.Type == "message.delta" {
		var d struct {
			Content string
			Reset   bool
		}
		mustUnmarshal(ty.p.t, ev.Data, &d)
		ty.deltas++
		if d.Reset {
			ty.resets++
			ty.voided = ty.text.String()
			ty.text.Reset()
		}
		ty.text.WriteString(d.Content)
		return false
	}
	if len(ty.events) == 0 {
		close(ty.opened)
	}
	ty.events = append(ty.events, ev)
	return ev.Type == "chat.completed" || ev.Type == "chat.failed" || ev.Type == "chat.cancelled"
}

// until waits for cond on the typist's state.
func (ty *typist) until(t *testing.T, within time.Duration, what string, cond func(ty *typist) bool) {
	t.Helper()
	deadline := time.After(within)
	for {
		ty.mu.Lock()
		ok := cond(ty)
		text := ty.text.String()
		ty.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ty.changed:
		case <-deadline:
			t.Fatalf("%s: the stream on %s shows %.80q…", what, ty.p.base, text)
		}
	}
}

// workersActive reads agentd_workers_active from a replica's /metrics.
func workersActive(p *proc) int {
	_, _, body := p.do("GET", "/metrics", nil)
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "agentd_workers_active "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int(n)
		}
	}
	return 0
}

// TestDeltasOnEveryReplicaBehindTheLoadBalancer: two replicas behind
// haproxy and a streaming model. A chat created through the balancer
// runs on one replica; a stream on the other one sees its reply being
// typed, and so does a stream opened through the balancer. The replica
// that runs the chat is killed (kill -9) in the middle of the reply: the
// other one takes the chat over when the lease runs out and asks the
// model again, and both streams see a reset, then the retried reply from
// its start, and exactly one message.
func TestDeltasOnEveryReplicaBehindTheLoadBalancer(t *testing.T) {
	t.Parallel()
	fake := openaitest.New(openaitest.WithAPIKey("sk-test-key"))
	defer fake.Close()
	var first, retried []string
	for i := range 600 {
		first = append(first, fmt.Sprintf("a%d ", i))
	}
	for i := range 60 {
		retried = append(retried, fmt.Sprintf("b%d ", i))
	}
	// The model starts its reply once both streams are open.
	open := make(chan struct{})
	fake.Reply(openaitest.Reply{Pieces: first, PieceDelay: 25 * time.Millisecond, Hold: open},
		openaitest.Reply{Pieces: retried, PieceDelay: 10 * time.Millisecond})
	env := []string{"AGENTD_DATABASE_URL=" + pgtest.URL(t), "AGENTD_LEASE_TTL=2s",
		"OPENAI_API_KEY=sk-test-key", "OPENAI_BASE_URL=" + fake.URL()}
	p1 := startAgentd(t, env...)
	p2 := startAgentd(t, env...)
	lb := &proc{t: t, base: startLB(t, p1, p2)}

	c := lb.create([]byte(openAIChat))
	var owner, other *proc
	waitFor(t, 20*time.Second, "a replica to run the chat", func() bool {
		switch {
		case workersActive(p1) == 1:
			owner, other = p1, p2
		case workersActive(p2) == 1:
			owner, other = p2, p1
		}
		return owner != nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	elsewhere, balanced := newTypist(other, c.ID), newTypist(lb, c.ID)
	var wg sync.WaitGroup
	for _, ty := range []*typist{elsewhere, balanced} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ty.run(ctx)
		}()
	}
	for _, ty := range []*typist{elsewhere, balanced} {
		select {
		case <-ty.opened:
		case <-time.After(time.Minute):
			t.Fatalf("the stream on %s did not open", ty.p.base)
		}
	}
	close(open)
	typing := func(ty *typist) bool { return strings.HasPrefix(ty.text.String(), "a0 a1 a2 a3 a4 ") }
	elsewhere.until(t, time.Minute, "the first reply being typed", typing)
	balanced.until(t, time.Minute, "the first reply being typed, through the balancer", typing)
	owner.kill9()

	wg.Wait()
	want := strings.Join(retried, "")
	for name, ty := range map[string]*typist{"the stream on the other replica": elsewhere, "the stream through the balancer": balanced} {
		var messages []string
		seen := map[int64]bool{}
		for _, e := range ty.events {
			if seen[e.ID] {
				t.Errorf("%s: event %d came twice", name, e.ID)
			}
			seen[e.ID] = true
			if e.Type == "message" {
				var m messageView
				mustUnmarshal(t, e.Data, &m)
				messages = append(messages, m.Name+": "+m.Content)
			}
		}
		if len(messages) != 2 || messages[1] != "writer: "+want {
			t.Errorf("%s: messages %.200q, want the task and the retried reply", name, messages)
		}
		if ty.resets == 0 || !strings.HasPrefix(ty.voided, "a0 a1 a2 a3 a4 ") && ty.voided != "" {
			t.Errorf("%s: %d resets, the last dropping %.80q", name, ty.resets, ty.voided)
		}
		if ty.text.String() != want {
			t.Errorf("%s: the deltas after the last reset add up to %.200q, want the retried reply", name, ty.text.String())
		}
		t.Logf("%s: %d deltas, %d resets, %d reconnects", name, ty.deltas, ty.resets, ty.reconnects)
	}
	if len(fake.Requests()) != 2 {
		t.Errorf("%d model requests, want 2", len(fake.Requests()))
	}
	if last := elsewhere.events[len(elsewhere.events)-1]; last.Type != "chat.completed" {
		t.Errorf("the chat ended with %s", last.Type)
	}
}
