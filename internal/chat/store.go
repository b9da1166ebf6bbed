package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentd/agentd/internal/spec"
)

// Errors a Store translates its database's errors into, so that callers never
// see a driver error type.
var (
	// ErrNotFound: no such chat (or it belongs to another tenant).
	ErrNotFound = errors.New("not found")
	// ErrConflict: a unique constraint was hit, e.g. an Idempotency-Key reused
	// with a different request body.
	ErrConflict = errors.New("conflict")
	// ErrFenced: the append carried a stale epoch or seq; another worker owns
	// the chat now, and this one must stop writing to it.
	ErrFenced = errors.New("fenced: chat is owned by another worker")
	// ErrInvalidCursor: a list cursor the store did not issue.
	ErrInvalidCursor = errors.New("invalid cursor")
	// ErrUnavailable: the database could not be reached (down, restarting,
	// out of connections, network). The operation may succeed if retried
	// later; callers wait or answer 503, never treat it as the request's fault.
	ErrUnavailable = errors.New("store unavailable")
	// ErrDataRejected: the database refused a value of the call (one it
	// cannot represent, or one over a size limit). Retrying the same call
	// fails the same way. The error's text never holds the value itself.
	ErrDataRejected = errors.New("data rejected by the store")
)

// Store is the durable log and the chat records. Implementations live in
// internal/store (Postgres and embedded SQLite) and pass one conformance suite.
//
// All methods are safe for concurrent use.
type Store interface {
	// CreateChat inserts a chat in status queued together with its first
	// events (at least chat.created, seq 1) in one transaction, leased to
	// p.Owner if set. When
	// p.IdempotencyKey is set and a chat of the tenant already has that key,
	// nothing is written: the existing chat is returned with created=false if
	// its RequestHash equals p.RequestHash, else ErrConflict.
	CreateChat(ctx context.Context, p *CreateChatParams) (c *Chat, created bool, err error)
	// GetChat returns a chat of the tenant; tenant "" matches any tenant.
	GetChat(ctx context.Context, tenant, id string) (*Chat, error)
	// GetProgress returns what a follower of a chat waits on, without the
	// rest of the chat (no spec): cheap enough to ask after every append.
	// Tenant "" matches any tenant.
	GetProgress(ctx context.Context, tenant, id string) (Progress, error)
	// ListChats returns a page of chats, newest first, and the cursor of the
	// next page ("" on the last page).
	ListChats(ctx context.Context, p *ListChatsParams) ([]*Chat, string, error)
	// ListEvents returns up to p.Limit events of a chat with seq > p.After, in seq order.
	ListEvents(ctx context.Context, p *ListEventsParams) ([]Event, error)
	// Append adds events to a chat's log and updates the chat record, in one
	// transaction, if and only if the chat's epoch equals p.Epoch and its
	// last_seq equals p.Events[0].Seq-1; otherwise it returns ErrFenced and
	// writes nothing. Appends of many chats may share a transaction (group
	// commit); Append returns once p's events are durable.
	Append(ctx context.Context, p *AppendParams) error
	// Claim takes the lease of up to p.Limit runnable chats (queued or running
	// with no live lease, or awaiting input with a cancel request, an input
	// response, or an input request that expired), increments
	// their epoch and returns them. Chats claimed by one caller are never
	// returned to a concurrent caller.
	Claim(ctx context.Context, p *ClaimParams) ([]*Chat, error)
	// RenewLeases extends the leases the owner still holds and reports, per
	// lease of p.Leases and in their order, whether it is still held and
	// whether a cancel was requested.
	RenewLeases(ctx context.Context, p *RenewLeasesParams) ([]LeaseState, error)
	// ReleaseLease hands a chat back (owner and lease cleared) if the lease is
	// still the caller's, so another replica may claim it at once.
	ReleaseLease(ctx context.Context, l Lease, owner string) error
	// RequestCancel records a cancel request on a non-terminal chat, drops
	// its queued runs, and returns the chat as it is afterwards.
	RequestCancel(ctx context.Context, tenant, id string) (*Chat, error)
	// SubmitInput stores a client's answer to the chat's pending input
	// request, if the chat is awaiting input with that request_id, has no
	// answer stored yet and no worker; otherwise it returns ErrNoPendingInput
	// (or ErrNotFound) and writes nothing. Storing the answer makes the chat
	// running and clears its pending input in the same write: from then on
	// every read, on every replica, shows the chat running with no request
	// until its worker appends the answer and, maybe, the next request. A
	// client that answered and polls for the next request so never sees the
	// answered one again. A chat with an answer is claimable.
	SubmitInput(ctx context.Context, p *SubmitInputParams) (*Chat, error)
	// SubmitRun posts a chat's next run (docs/runs.md) and returns the chat
	// as it is afterwards and the run's number. A chat is busy while a run
	// is active (not ended) or waits to start. A busy chat takes p.IfBusy:
	// IfBusyReject writes nothing and returns a *BusyError; IfBusyEnqueue
	// queues the run after the others; IfBusyInterrupt drops the queued
	// runs, asks the active run to cancel and queues this one next (run
	// numbers are never given out twice: a dropped run leaves a gap). A chat
	// that is not busy queues the run for its next worker (the chat becomes
	// claimable).
	SubmitRun(ctx context.Context, p *SubmitRunParams) (*Chat, int, error)
	// QueuedRun returns the first queued run of a chat with a number above
	// after, or ErrNotFound.
	QueuedRun(ctx context.Context, chatID string, after int) (*QueuedRun, error)
	// RequestStop records a stop request (POST /stop) on a chat whose run
	// has not ended and returns the chat as it is afterwards (unchanged
	// when its run had ended). With keyed set, the answer is stored with
	// its key, or, if the key was answered, nothing is done and the
	// answer is an *AnsweredError (ErrConflict for another request).
	RequestStop(ctx context.Context, tenant, id string, keyed *KeyedRequest) (*Chat, error)
	// CountByStatus returns the number of chats in each status.
	CountByStatus(ctx context.Context) (map[Status]int64, error)
	// KeyedStore reads the answers of keyed requests.
	KeyedStore
	// AppStore serves webhooks, search, erasure and saved teams (backend.go).
	AppStore
}

// Notifier is implemented by stores that several replicas share (Postgres):
// it tells every replica which chats' logs grew and which chats were asked
// to cancel, so a replica streams events of chats another one runs and cuts
// its own turns on a cancel received elsewhere. The embedded SQLite store
// serves one process and needs none.
type Notifier interface {
	// Listen calls the handler's functions as notifications arrive, until
	// ctx ends; it reconnects by itself.
	Listen(ctx context.Context, h NotifyHandler) error
}

// NotifyHandler receives a Notifier's notifications. Every field is optional.
type NotifyHandler struct {
	Appended        func(chatID string)
	CancelRequested func(chatID string)
	// StopRequested: POST /stop on the chat (see Store.RequestStop).
	StopRequested func(chatID string)
	// RunQueued: a run was posted for the chat (see Store.SubmitRun).
	RunQueued func(chatID string)
	// TeamSaved: a new version of one of the tenant's saved teams was
	// put, on any replica (see AppStore.PutTeam).
	TeamSaved func(tenant string)
	// Reconnected is called after the listener lost its connection: what
	// was sent meanwhile is lost, so everything should be looked at again.
	Reconnected func()
	// Listening is called each time the listener starts to listen: at
	// first, and after a reconnect (after Reconnected).
	Listening func()
	// Self is the name this replica relays under (DeltaRelay): what it
	// relayed itself is not handed back to it.
	Self string
	// Deltas receives the deltas another replica relayed (from names it).
	Deltas func(from string, ds []RelayedDelta)
	// Follows receives another replica's word that its streams follow the
	// chats' deltas, or (no chat ids) its question what this one follows
	// (see DeltaRelay.RelayFollows).
	Follows func(from string, chatIDs []string, replay bool)
	// RelayFailed is told that n deltas this replica relayed could not be
	// sent to the others.
	RelayFailed func(n int, err error)
}

// DeltaRelay is implemented by stores that several replicas share
// (Postgres): it carries the deltas of replies being streamed from the
// replica that runs a chat to the others, and the word of which chats'
// deltas a replica's streams want. Both travel batched with the store's
// notifications (no write and no notification per delta) and are best
// effort: a delta that does not arrive costs a stream that fragment, never
// a message. A Notifier's Listen hands what the other replicas relayed to
// its handler.
type DeltaRelay interface {
	// RelayDelta queues a delta for the other replicas; it never blocks.
	RelayDelta(from string, d RelayedDelta)
	// RelayFollows queues the word, for the other replicas, that from's
	// streams want the chats' deltas; replay asks the replica that runs
	// each for its replies in progress from their start. Without chat ids
	// it asks the others what they follow (a replica that starts). It
	// never blocks.
	RelayFollows(from string, chatIDs []string, replay bool)
}

// RelayedDelta is a delta on its way between replicas.
type RelayedDelta struct {
	ChatID string
	// Epoch is the lease epoch of the worker that streams the reply.
	Epoch int64
	Delta
	// Replay: Content is the reply's whole text so far, not a fragment.
	Replay bool
}

// CreateChatParams are the arguments of Store.CreateChat.
type CreateChatParams struct {
	ID             string
	Tenant         string
	Name           string
	Spec           json.RawMessage
	Metadata       json.RawMessage
	IdempotencyKey string
	RequestHash    string
	CreatedAt      time.Time
	// Events are the chat's first events, seq 1, 2, …; their ChatID is set by the store.
	Events []Event
	// Owner, when set, creates the chat already claimed: owned by Owner,
	// epoch 1, leased until LeaseUntil. The replica that creates a chat
	// then runs it at once, without finding it again through Claim.
	Owner      string
	LeaseUntil time.Time
	// State, for a fork, is the chat as its copied log leaves it (status,
	// counters, run, pending input); nil for a new chat, which is queued
	// at run 1.
	State *ChatUpdate
	// ForkedFrom is where a fork's log was copied from.
	ForkedFrom *ForkRef
	// Team is the saved team the chat was created from, if any.
	Team *TeamRef
	// Deliveries are webhook deliveries of Events, written to the outbox
	// in the same transaction.
	Deliveries []Delivery
	// Keyed, for a fork, is the keyed POST /fork on the source chat that
	// makes it: its answer (the fork) is stored in the same transaction,
	// or, if the key was answered, nothing is written and the answer is
	// an *AnsweredError (ErrConflict for another request).
	Keyed *KeyedRequest
}

// Progress is how far a chat has got: the part of a Chat that changes with
// its appends and that followers (long polls, wait_s) decide on.
type Progress struct {
	Status  Status
	LastSeq int64
	// InputAnswered: an answer to an input request is stored and waits
	// for a worker (Chat.InputResponse is set; the chat is running).
	InputAnswered bool
}

// ListChatsParams are the arguments of Store.ListChats.
type ListChatsParams struct {
	Tenant string // "" lists every tenant's chats
	Status Status // "" lists every status
	Limit  int
	Cursor string // opaque, from a previous page
	// Metadata filters: every match must hold.
	Metadata []MetadataMatch
	// Name and Team, when set, must equal the chat's name and the name of
	// the saved team it was created from.
	Name string
	Team string
	// CreatedAfter and CreatedBefore, when set, bound created_at
	// (exclusive).
	CreatedAfter  *time.Time
	CreatedBefore *time.Time
}

// ListEventsParams are the arguments of Store.ListEvents.
type ListEventsParams struct {
	ChatID string
	After  int64
	Limit  int
	// Type, when set, lists only the events of that type (a chat's
	// context.updated events, which its variables are the fold of).
	Type EventType
}

// AppendParams are the arguments of Store.Append.
type AppendParams struct {
	ChatID string
	Epoch  int64
	// Events have consecutive seqs starting at the chat's last_seq+1.
	Events []Event
	// Update is the state of the chat record after these events.
	Update ChatUpdate
	// StartKey is set on the append that starts a queued run (its
	// run.started): the QueuedRun's key. The append takes only while that
	// run is still queued (a cancel or an interrupt may have dropped it);
	// otherwise it is fenced.
	StartKey string
	// Deliveries are webhook deliveries of Events, written to the outbox
	// in the same transaction (none for most appends).
	Deliveries []Delivery
	// Trace, when set, is filled in by the store's group commit: when the
	// append's batch left the queue and when it committed, the two parts
	// of an append's wait its caller cannot see. Only the turn-cycle
	// benchmark sets it; nil costs nothing.
	Trace *AppendTrace
}

// AppendTrace is what a store's group commit tells of one append (see
// AppendParams.Trace).
type AppendTrace struct {
	// Taken is when the append's batch was taken from the queue; Committed
	// when that batch's transaction returned.
	Taken, Committed time.Time
	// Batch is the number of appends in that batch.
	Batch int
}

// ChatUpdate is the part of a chat record its worker owns, as it stands after
// an append. The worker derives every field from the log, so the update is
// absolute, not a delta: replaying an append's effect is harmless.
type ChatUpdate struct {
	Status           Status
	StopReason       StopReason
	StopDetail       string
	Error            string
	Turns            int
	MessageCount     int
	PromptTokens     int64
	CompletionTokens int64
	// PendingInput is stored as is; nil clears it.
	PendingInput json.RawMessage
	// InputExpiresAt is when a pending input request times out; nil clears it.
	// Every append also clears the chat's input response: only the worker
	// that consumes it appends while one is stored.
	InputExpiresAt *time.Time
	// CompletedAt is set with a terminal status.
	CompletedAt *time.Time
	UpdatedAt   time.Time
	// ReleaseLease clears owner and lease in the same transaction (a chat that
	// ended or waits for input needs no worker).
	ReleaseLease bool
	// Run is the number of the chat's latest run. An append whose status is
	// terminal ends that run: it clears the chat's cancel and stop
	// requests, which were the run's.
	Run int
}

// The answers to a busy chat of SubmitRunParams.IfBusy: a run request's
// if_busy (spec.RunRequest).
const (
	IfBusyReject    = spec.IfBusyReject
	IfBusyEnqueue   = spec.IfBusyEnqueue
	IfBusyInterrupt = spec.IfBusyInterrupt
)

// SubmitRunParams are the arguments of Store.SubmitRun.
type SubmitRunParams struct {
	Tenant string
	ChatID string
	// Request is the run as the runtime stores it for the worker that
	// starts it (see QueuedRun).
	Request json.RawMessage
	IfBusy  string
	// Key identifies this run among every run ever queued for the chat.
	Key string
	Now time.Time
	// Keyed, when set, stores the answer with the client's key in the same
	// transaction; a key already answered writes nothing and returns an
	// *AnsweredError (ErrConflict for another request).
	Keyed *KeyedRequest
}

// QueuedRun is a run posted and not started yet.
type QueuedRun struct {
	Run       int
	Key       string
	Request   json.RawMessage
	CreatedAt time.Time
}

// BusyError is SubmitRun's answer to a busy chat when IfBusy is reject:
// Run is the run that is active or about to start.
type BusyError struct {
	Run int
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("run %d of the chat is active or about to start", e.Run)
}

// SubmitInputParams are the arguments of Store.SubmitInput.
type SubmitInputParams struct {
	Tenant    string
	ChatID    string
	RequestID string
	Response  json.RawMessage
	Now       time.Time
	// Keyed: as in SubmitRunParams.
	Keyed *KeyedRequest
}

// ClaimParams are the arguments of Store.Claim.
type ClaimParams struct {
	Owner string
	Now   time.Time
	// LeaseUntil is when the new leases expire unless renewed.
	LeaseUntil time.Time
	Limit      int
}

// Lease identifies one worker's hold on a chat.
type Lease struct {
	ChatID string
	Epoch  int64
}

// RenewLeasesParams are the arguments of Store.RenewLeases.
type RenewLeasesParams struct {
	Owner      string
	Leases     []Lease
	LeaseUntil time.Time
}

// LeaseState is the answer of RenewLeases for one lease. It names the
// lease's epoch as well as its chat: a replica may have started a new worker
// for the chat, under a newer lease, while the renewal was under way, and
// the answer is not about that worker.
type LeaseState struct {
	ChatID          string
	Epoch           int64
	Held            bool
	CancelRequested bool
	StopRequested   bool
}
