// Package storetest is the conformance suite of chat.Store: every driver in
// internal/store runs Run against a real database and must pass all of it, so
// the Postgres and SQLite stores cannot drift apart in behaviour.
//
// Each subtest asks newStore for a store of its own (an isolated, empty,
// migrated database) and runs in parallel with the others.
package storetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/agentd/agentd/internal/chat"
)

// Option configures Run.
type Option func(*options)

type options struct {
	exec  func(t *testing.T, s chat.Store, sql string) error
	count func(t *testing.T, s chat.Store, sql string) (int64, error)
	// chatTables are "table.column" pairs naming every place that holds
	// a chat's rows, for the erasure checks.
	chatTables []string
}

// WithCount gives the suite a way to run a raw SQL query of one integer
// (a count) on the database behind s, and names every table.column that
// holds rows of a chat: erasure must leave none of them. Without it those
// checks are skipped.
func WithCount(count func(t *testing.T, s chat.Store, sql string) (int64, error), chatTables ...string) Option {
	return func(o *options) { o.count, o.chatTables = count, chatTables }
}

// WithExec gives the suite a way to run a raw SQL statement on the database
// behind s, for the checks that the database itself enforces rules (the
// append-only events table). Without it those checks are skipped.
func WithExec(exec func(t *testing.T, s chat.Store, sql string) error) Option {
	return func(o *options) { o.exec = exec }
}

// Run runs the conformance suite. newStore must return a store backed by a
// fresh, empty, migrated database and arrange its cleanup with t.Cleanup.
func Run(t *testing.T, newStore func(t *testing.T) chat.Store, opts ...Option) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, s chat.Store)
	}{
		{"CreateChat", testCreateChat},
		{"CreateChatRejectsBadParams", testCreateChatRejectsBadParams},
		{"CreateChatDuplicateID", testCreateChatDuplicateID},
		{"CreateChatIdempotency", testCreateChatIdempotency},
		{"CreateChatIdempotencyRace", testCreateChatIdempotencyRace},
		{"GetChat", testGetChat},
		{"GetProgress", testGetProgress},
		{"ListChats", testListChats},
		{"ListEvents", testListEvents},
		{"AppendDenseSeq", testAppendDenseSeq},
		{"AppendFencedStaleEpoch", testAppendFencedStaleEpoch},
		{"AppendFencedWrongFirstSeq", testAppendFencedWrongFirstSeq},
		{"AppendRejectsOversizeEvent", testAppendRejectsOversizeEvent},
		{"AppendRejectsBadParams", testAppendRejectsBadParams},
		{"AppendUnknownChat", testAppendUnknownChat},
		{"AppendCancelledContext", testAppendCancelledContext},
		{"AppendAfterClaim", testAppendAfterClaim},
		{"GroupCommitManyChats", testGroupCommitManyChats},
		{"GroupCommitIsolatesFailures", testGroupCommitIsolatesFailures},
		{"GroupCommitMixesCreatesAndAppends", testGroupCommitMixesCreatesAndAppends},
		{"Text", testText},
		{"Claim", testClaim},
		{"ClaimConcurrent", testClaimConcurrent},
		{"ClaimExpiredLease", testClaimExpiredLease},
		{"ClaimOldestFirstAcrossOwnership", testClaimOldestFirstAcrossOwnership},
		{"CreateChatClaimed", testCreateChatClaimed},
		{"CreateChatClaimedIdempotency", testCreateChatClaimedIdempotency},
		{"RenewLeases", testRenewLeases},
		{"ReleaseLease", testReleaseLease},
		{"RequestCancel", testRequestCancel},
		{"CountByStatus", testCountByStatus},
		{"SubmitInput", testSubmitInput},
		{"EventsAppendOnly", func(t *testing.T, s chat.Store) { testEventsAppendOnly(t, s, o.exec) }},
		{"SubmitRun", testSubmitRun},
		{"SubmitRunInterrupt", testSubmitRunInterrupt},
		{"StartRunFencedWhenDropped", testStartRunFencedWhenDropped},
		{"ClaimNextRun", testClaimNextRun},
		{"RequestStop", testRequestStop},
		{"CreateFork", testCreateFork},
		{"KeyedRuns", testKeyedRuns},
		{"KeyedRunsConcurrent", testKeyedRunsConcurrent},
		{"KeyedStopInputFork", testKeyedStopInputFork},
		{"ListChatsFilters", testListChatsFilters},
		{"ListChatsMetadataTenants", testListChatsMetadataTenants},
		{"PatchMetadata", testPatchMetadata},
		{"EraseChat", func(t *testing.T, s chat.Store) { testEraseChat(t, s, &o) }},
		{"EraseEnded", testEraseEnded},
		{"Teams", testTeams},
		{"TeamsConcurrentPut", testTeamsConcurrentPut},
		{"CreateChatFromTeam", testCreateChatFromTeam},
		{"Deliveries", testDeliveries},
		{"DeliveriesCountWhatWasSent", testDeliveriesCountWhatWasSent},
		{"DeliveriesOfFencedAppend", testDeliveriesOfFencedAppend},
		{"DeliveriesRetryAndDisable", testDeliveriesRetryAndDisable},
		{"ClaimDeliveriesConcurrent", testClaimDeliveriesConcurrent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, newStore(t))
		})
	}
}

// base is the fixtures' clock: microsecond precision (what Postgres keeps) in
// a zone other than UTC, to check that stores return UTC.
var base = time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.FixedZone("UTC+2", 2*3600))

func at(d time.Duration) time.Time { return base.Add(d) }

// createParams returns the params of a chat with a chat.created event and a
// task message (seq 1 and 2).
func createParams(tenant string, createdAt time.Time) *chat.CreateChatParams {
	return &chat.CreateChatParams{
		ID:          uuid.NewString(),
		Tenant:      tenant,
		Name:        "review",
		Spec:        json.RawMessage(`{"name": "review", "agents": [{"name": "coder", "type": "assistant"}], "max_round": 3}`),
		Metadata:    json.RawMessage(`{"ticket": "ABC-1"}`),
		RequestHash: "hash-1",
		CreatedAt:   createdAt,
		Events: []chat.Event{
			{Seq: 1, Type: chat.EventChatCreated, Data: json.RawMessage(`{"status": "queued"}`), CreatedAt: createdAt},
			{Seq: 2, Type: chat.EventMessage, Role: chat.RoleUser, Name: chat.UserName, Content: "Reverse a string.",
				Data: json.RawMessage(`{"kind": "task"}`), CreatedAt: createdAt},
		},
	}
}

func mustCreate(t *testing.T, s chat.Store, p *chat.CreateChatParams) *chat.Chat {
	t.Helper()
	c, created, err := s.CreateChat(t.Context(), p)
	if err != nil {
		t.Fatalf("CreateChat: %v", err)
	}
	if !created {
		t.Fatalf("CreateChat: created = false for a new chat")
	}
	return c
}

func mustGet(t *testing.T, s chat.Store, id string) *chat.Chat {
	t.Helper()
	c, err := s.GetChat(t.Context(), "", id)
	if err != nil {
		t.Fatalf("GetChat(%s): %v", id, err)
	}
	return c
}

func mustEvents(t *testing.T, s chat.Store, id string) []chat.Event {
	t.Helper()
	es, err := s.ListEvents(t.Context(), &chat.ListEventsParams{ChatID: id, Limit: 10000})
	if err != nil {
		t.Fatalf("ListEvents(%s): %v", id, err)
	}
	return es
}

// message returns a message event with the given seq.
func message(seq int64, content string, created time.Time) chat.Event {
	return chat.Event{Seq: seq, Type: chat.EventMessage, Role: chat.RoleAssistant, Name: "coder",
		Content: content, Data: json.RawMessage(`{"kind": "model", "turn": 1}`), CreatedAt: created}
}

// advance appends one event to c as its current owner would and returns the
// chat afterwards.
func advance(t *testing.T, s chat.Store, c *chat.Chat, u chat.ChatUpdate) *chat.Chat {
	t.Helper()
	if u.UpdatedAt.IsZero() {
		u.UpdatedAt = at(time.Hour)
	}
	e := chat.Event{Seq: c.LastSeq + 1, Type: chat.EventSpeakerSelected, Data: json.RawMessage(`{"agent": "coder"}`), CreatedAt: u.UpdatedAt}
	if err := s.Append(t.Context(), &chat.AppendParams{ChatID: c.ID, Epoch: c.Epoch, Events: []chat.Event{e}, Update: u}); err != nil {
		t.Fatalf("Append to %s: %v", c.ID, err)
	}
	return mustGet(t, s, c.ID)
}

// finish moves c to a terminal status.
func finish(t *testing.T, s chat.Store, c *chat.Chat) *chat.Chat {
	t.Helper()
	done := at(2 * time.Hour)
	return advance(t, s, c, chat.ChatUpdate{Status: chat.StatusCompleted, StopReason: chat.StopMaxRound,
		StopDetail: "Maximum number of turns 3 reached.", CompletedAt: &done, UpdatedAt: done, ReleaseLease: true})
}

func jsonEqual(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}

func timeEqual(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

func checkUTC(t *testing.T, what string, ts ...*time.Time) {
	t.Helper()
	for _, tm := range ts {
		if tm != nil && tm.Location() != time.UTC {
			t.Errorf("%s: time %v is in %v, want UTC", what, tm, tm.Location())
		}
	}
}

// diffChat lists the fields in which got differs from want.
func diffChat(got, want *chat.Chat) []string {
	var d []string
	add := func(field string, g, w any) { d = append(d, fmt.Sprintf("%s = %v, want %v", field, g, w)) }
	if got.ID != want.ID {
		add("ID", got.ID, want.ID)
	}
	if got.Tenant != want.Tenant {
		add("Tenant", got.Tenant, want.Tenant)
	}
	if got.Name != want.Name {
		add("Name", got.Name, want.Name)
	}
	if !jsonEqual(got.Spec, want.Spec) {
		add("Spec", string(got.Spec), string(want.Spec))
	}
	if !jsonEqual(got.Metadata, want.Metadata) {
		add("Metadata", string(got.Metadata), string(want.Metadata))
	}
	if got.Status != want.Status {
		add("Status", got.Status, want.Status)
	}
	if got.StopReason != want.StopReason {
		add("StopReason", got.StopReason, want.StopReason)
	}
	if got.StopDetail != want.StopDetail {
		add("StopDetail", got.StopDetail, want.StopDetail)
	}
	if got.Error != want.Error {
		add("Error", got.Error, want.Error)
	}
	if got.LastSeq != want.LastSeq {
		add("LastSeq", got.LastSeq, want.LastSeq)
	}
	if got.Turns != want.Turns {
		add("Turns", got.Turns, want.Turns)
	}
	if got.MessageCount != want.MessageCount {
		add("MessageCount", got.MessageCount, want.MessageCount)
	}
	if got.PromptTokens != want.PromptTokens {
		add("PromptTokens", got.PromptTokens, want.PromptTokens)
	}
	if got.CompletionTokens != want.CompletionTokens {
		add("CompletionTokens", got.CompletionTokens, want.CompletionTokens)
	}
	if !jsonEqual(got.InputResponse, want.InputResponse) {
		add("InputResponse", string(got.InputResponse), string(want.InputResponse))
	}
	if !timeEqual(got.InputExpiresAt, want.InputExpiresAt) {
		add("InputExpiresAt", got.InputExpiresAt, want.InputExpiresAt)
	}
	if !jsonEqual(got.PendingInput, want.PendingInput) {
		add("PendingInput", string(got.PendingInput), string(want.PendingInput))
	}
	if got.IdempotencyKey != want.IdempotencyKey {
		add("IdempotencyKey", got.IdempotencyKey, want.IdempotencyKey)
	}
	if got.RequestHash != want.RequestHash {
		add("RequestHash", got.RequestHash, want.RequestHash)
	}
	if got.CancelRequested != want.CancelRequested {
		add("CancelRequested", got.CancelRequested, want.CancelRequested)
	}
	if got.Owner != want.Owner {
		add("Owner", got.Owner, want.Owner)
	}
	if !timeEqual(got.LeaseExpiresAt, want.LeaseExpiresAt) {
		add("LeaseExpiresAt", got.LeaseExpiresAt, want.LeaseExpiresAt)
	}
	if got.Epoch != want.Epoch {
		add("Epoch", got.Epoch, want.Epoch)
	}
	if !got.CreatedAt.Equal(want.CreatedAt) {
		add("CreatedAt", got.CreatedAt, want.CreatedAt)
	}
	if !got.UpdatedAt.Equal(want.UpdatedAt) {
		add("UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	}
	if !timeEqual(got.CompletedAt, want.CompletedAt) {
		add("CompletedAt", got.CompletedAt, want.CompletedAt)
	}
	if got.Run != want.Run {
		add("Run", got.Run, want.Run)
	}
	if got.QueuedRuns != want.QueuedRuns {
		add("QueuedRuns", got.QueuedRuns, want.QueuedRuns)
	}
	if got.StopRequested != want.StopRequested {
		add("StopRequested", got.StopRequested, want.StopRequested)
	}
	if !reflect.DeepEqual(got.ForkedFrom, want.ForkedFrom) {
		add("ForkedFrom", got.ForkedFrom, want.ForkedFrom)
	}
	if !reflect.DeepEqual(got.Team, want.Team) {
		add("Team", got.Team, want.Team)
	}
	return d
}

func assertChat(t *testing.T, what string, got, want *chat.Chat) {
	t.Helper()
	if d := diffChat(got, want); len(d) > 0 {
		t.Errorf("%s: chat differs:\n  %s", what, strings.Join(d, "\n  "))
	}
	checkUTC(t, what, &got.CreatedAt, &got.UpdatedAt, got.CompletedAt, got.LeaseExpiresAt)
}

func assertEvents(t *testing.T, what string, got, want []chat.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events (seqs %v), want %d (seqs %v)", what, len(got), seqs(got), len(want), seqs(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		checkUTC(t, what, &g.CreatedAt)
		ok := g.ChatID == w.ChatID && g.Seq == w.Seq && g.Type == w.Type && g.Role == w.Role &&
			g.Name == w.Name && g.Content == w.Content && reflect.DeepEqual(g.ToolCalls, w.ToolCalls) &&
			reflect.DeepEqual(g.ToolResponses, w.ToolResponses) && jsonEqual(g.Data, w.Data) &&
			g.CreatedAt.Equal(w.CreatedAt)
		if !ok {
			t.Errorf("%s: event %d:\n  got  %+v (data %s)\n  want %+v (data %s)", what, i, g, g.Data, w, w.Data)
		}
	}
}

func seqs(es []chat.Event) []int64 {
	s := make([]int64, len(es))
	for i, e := range es {
		s[i] = e.Seq
	}
	return s
}

// withChatID returns a copy of es with ChatID set, as a store returns them.
func withChatID(id string, es ...chat.Event) []chat.Event {
	out := slices.Clone(es)
	for i := range out {
		out[i].ChatID = id
	}
	return out
}

// expectedNew is the record CreateChat must produce from p.
func expectedNew(p *chat.CreateChatParams) *chat.Chat {
	msgs := 0
	for _, e := range p.Events {
		if e.Type == chat.EventMessage {
			msgs++
		}
	}
	return &chat.Chat{ID: p.ID, Tenant: p.Tenant, Name: p.Name, Spec: p.Spec, Metadata: p.Metadata,
		Status: chat.StatusQueued, LastSeq: int64(len(p.Events)), MessageCount: msgs,
		IdempotencyKey: p.IdempotencyKey, RequestHash: p.RequestHash, Run: 1,
		CreatedAt: p.CreatedAt, UpdatedAt: p.CreatedAt, Team: p.Team}
}
