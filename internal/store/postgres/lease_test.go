package postgres

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/agentd/agentd/internal/chat"
)

// TestRenewLeasesWaitsForNoRowWhileHoldingOthers holds one chat's row
// locked, as an append batch does until it commits, and renews the leases
// of that chat and another. The other lease must be renewed and committed
// while the row is still locked: a renewal that sat on the other row while
// it waited could deadlock with a batch that wants that row next, and
// Postgres breaks such a cycle only after deadlock_timeout.
func TestRenewLeasesWaitsForNoRowWhileHoldingOthers(t *testing.T) {
	t.Parallel()
	s := newStore(t).(*Store)
	ctx := t.Context()
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 2 {
		at := base.Add(time.Duration(i) * time.Second)
		if _, _, err := s.CreateChat(ctx, &chat.CreateChatParams{
			ID: uuid.NewString(), Tenant: "acme", Spec: json.RawMessage(`{}`), CreatedAt: at,
			Events: []chat.Event{{Seq: 1, Type: chat.EventChatCreated, Data: json.RawMessage(`{}`), CreatedAt: at}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	claimed, err := s.Claim(ctx, &chat.ClaimParams{Owner: "a", Now: base, LeaseUntil: base.Add(time.Minute), Limit: 2})
	if err != nil || len(claimed) != 2 {
		t.Fatalf("Claim: %d chats, %v", len(claimed), err)
	}
	free, busy := claimed[0], claimed[1]

	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `UPDATE chat_state SET updated_at = now() WHERE id = $1`, busy.ID); err != nil {
		t.Fatal(err)
	}

	until := base.Add(2 * time.Minute)
	type result struct {
		states []chat.LeaseState
		err    error
	}
	done := make(chan result, 1)
	go func() {
		states, err := s.RenewLeases(ctx, &chat.RenewLeasesParams{Owner: "a", LeaseUntil: until,
			Leases: []chat.Lease{{ChatID: busy.ID, Epoch: busy.Epoch}, {ChatID: free.ID, Epoch: free.Epoch}}})
		done <- result{states, err}
	}()

	deadline := time.Now().Add(10 * time.Second)
	for {
		var got time.Time
		if err := s.pool.QueryRow(ctx, `SELECT lease_expires_at FROM chat_state WHERE id = $1`, free.ID).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got.Equal(until) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the free chat's lease was not renewed while another chat's row was locked")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case r := <-done:
		t.Fatalf("RenewLeases returned while the busy row was locked: %+v, %v", r.states, r.err)
	default:
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, st := range r.states {
		if !st.Held {
			t.Errorf("lease of %s not held after renewal", st.ChatID)
		}
	}
	var got time.Time
	if err := s.pool.QueryRow(ctx, `SELECT lease_expires_at FROM chat_state WHERE id = $1`, busy.ID).Scan(&got); err != nil || !got.Equal(until) {
		t.Fatalf("busy chat's lease expires at %v (%v), want %v", got, err, until)
	}
}

// The batched statements' arguments encode in Postgres's binary format:
// one that pgx cannot encode so (a string as a uuid) is encoded as text
// after a failed attempt, on every batch. The appends' arrays, written by
// writeAppends, must be of the types the statement's parameters have.
func TestBatchedArgumentsEncodeInBinary(t *testing.T) {
	t.Parallel()
	s := newStore(t).(*Store)
	ctx := t.Context()
	at := time.Now()
	var bb batchBuffers
	bb.ords = []int{0}
	if err := bb.writeAppends([]*op{{Append: &chat.AppendParams{ChatID: uuid.NewString(), Epoch: 1,
		Events: []chat.Event{{Seq: 3, Type: chat.EventMessage, Role: chat.RoleAssistant, Name: "a", Content: "hi",
			Data: json.RawMessage(`{"kind": "model"}`), CreatedAt: at}},
		Update: chat.ChatUpdate{Status: chat.StatusRunning, CompletedAt: &at, UpdatedAt: at}}}}); err != nil {
		t.Fatal(err)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	m := conn.Conn().TypeMap()
	sd, err := conn.Conn().Prepare(ctx, "", appendsSQL)
	if err != nil {
		t.Fatal(err)
	}
	if len(bb.params) != len(sd.ParamOIDs) {
		t.Fatalf("%d arrays for %d parameters", len(bb.params), len(sd.ParamOIDs))
	}
	for i, p := range bb.params {
		typ, ok := m.TypeForOID(sd.ParamOIDs[i])
		if !ok {
			t.Fatalf("$%d: unknown type %d", i+1, sd.ParamOIDs[i])
		}
		ac, ok := typ.Codec.(*pgtype.ArrayCodec)
		if !ok {
			t.Fatalf("$%d is a %s, not an array", i+1, typ.Name)
		}
		if elem := binary.BigEndian.Uint32(p[8:12]); elem != ac.ElementType.OID {
			t.Errorf("$%d is a %s; its array has elements of type %d", i+1, typ.Name, elem)
		}
	}
	renew := []any{at, [][16]byte{uuid.New()}, []int64{1}, "owner"}
	sd, err = conn.Conn().Prepare(ctx, "", renewSQL)
	if err != nil {
		t.Fatal(err)
	}
	for i, arg := range renew {
		oid := sd.ParamOIDs[i]
		if m.FormatCodeForOID(oid) != pgtype.BinaryFormatCode {
			continue
		}
		if _, err := m.Encode(oid, pgtype.BinaryFormatCode, arg, nil); err != nil {
			t.Errorf("renewal: argument $%d: %v", i+1, err)
		}
	}
}

// The ids of a flush go in as few notifications as Postgres takes, each
// id in one of them, whole.
func TestPayloadsHoldEveryIDOnceWithinTheLimit(t *testing.T) {
	var ids []string
	for range 500 {
		ids = append(ids, uuid.NewString())
	}
	ps := payloads(ids)
	if len(ps) != 3 {
		t.Errorf("%d payloads for 500 ids, want 3", len(ps))
	}
	var got []string
	for _, p := range ps {
		if len(p) > maxPayload {
			t.Fatalf("payload of %d bytes", len(p))
		}
		got = append(got, strings.Split(p, ",")...)
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("payloads hold %d ids, not the 500 given in order", len(got))
	}
	if ps := payloads(nil); len(ps) != 0 {
		t.Fatalf("payloads(nil) = %q", ps)
	}
}

// A flush's notification names every chat it carries to the listeners.
func TestOneNotificationWakesEveryChatItNames(t *testing.T) {
	t.Parallel()
	s := newStore(t).(*Store)
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan string, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Listen(ctx, chat.NotifyHandler{Appended: func(id string) { got <- id }})
	}()
	defer func() { cancel(); <-done }()
	ids := []string{uuid.NewString(), uuid.NewString(), uuid.NewString()}
	seen := map[string]bool{}
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for len(seen) < len(ids) {
		select {
		case id := <-got:
			if !slices.Contains(ids, id) {
				t.Fatalf("woken for %q, which no flush named", id)
			}
			seen[id] = true
		case <-tick.C:
			s.notify.add(ids) // until the listener listens
		case <-deadline:
			t.Fatalf("woken for %d of %d chats", len(seen), len(ids))
		}
	}
}

// Under a stream of commits the notifier sends at most one statement per
// notifyInterval, and every id in one of them.
func TestNotificationsAreSentAtMostOncePerInterval(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		sends int
		sent  = map[string]bool{}
	)
	n := startNotifier(nil, nil, func(f *flush) {
		mu.Lock()
		defer mu.Unlock()
		sends++
		for _, id := range f.ids {
			sent[id] = true
		}
	})
	start := time.Now()
	for i := range 200 {
		n.add([]string{strconv.Itoa(i)})
		time.Sleep(500 * time.Microsecond)
	}
	n.close()
	elapsed := time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	if len(sent) != 200 {
		t.Fatalf("%d of 200 ids sent", len(sent))
	}
	if most := int(elapsed/notifyInterval) + 2; sends > most {
		t.Fatalf("%d sends in %v, want at most %d", sends, elapsed, most)
	}
}

// A new version of a saved team is told to every listener with its
// tenant; a put that changes nothing tells nothing.
func TestAPutTeamIsToldToTheListeners(t *testing.T) {
	t.Parallel()
	s := newStore(t).(*Store)
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan string, 10)
	listening := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Listen(ctx, chat.NotifyHandler{TeamSaved: func(tenant string) { got <- tenant },
			Listening: func() { listening <- struct{}{} }})
	}()
	defer func() { cancel(); <-done }()
	<-listening
	put := func(tenant, spec string) {
		t.Helper()
		if _, _, err := s.PutTeam(ctx, &chat.PutTeamParams{Tenant: tenant, Name: "crew", Spec: json.RawMessage(spec)}); err != nil {
			t.Fatal(err)
		}
	}
	next := func() string {
		t.Helper()
		select {
		case tenant := <-got:
			return tenant
		case <-time.After(10 * time.Second):
			t.Fatal("no notification of the put")
			return ""
		}
	}
	put("acme", `{"agents": [{"name": "a"}]}`)
	if tenant := next(); tenant != "acme" {
		t.Fatalf("told of tenant %q, want acme", tenant)
	}
	put("acme", `{"agents": [{"name": "a"}]}`) // the same spec: no new version
	put("zeta", `{"agents": [{"name": "z"}]}`)
	if tenant := next(); tenant != "zeta" {
		t.Fatalf("told of tenant %q after a put that made no version, want zeta's", tenant)
	}
}
