package chat

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/agentd/agentd/internal/spec"
)

// This file holds the domain types of agentd as an application's backend
// (docs/backend.md): webhook deliveries, metadata search and changes, erasure and
// retention, saved teams; and the part of Store that serves them.

// Errors of the application-backend features.
var (
	// ErrChatActive: the chat has not ended, and the operation (erasure)
	// needs an ended chat.
	ErrChatActive = errors.New("the chat has not ended")
	// ErrTeamNotFound: no saved team (or version) of that name for the tenant.
	ErrTeamNotFound = errors.New("team not found")
	// ErrMetadataTooLarge: metadata merged with a patch would be larger
	// than the limit.
	ErrMetadataTooLarge = errors.New("metadata too large")
)

// TeamRef names one version of a saved team: what a chat created from it
// records.
type TeamRef struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
}

// Team is one immutable version of a saved team: a chat spec without a task.
type Team struct {
	Tenant    string
	Name      string
	Version   int
	Spec      json.RawMessage
	CreatedAt time.Time
}

// MetadataMatch is one metadata.KEY=VALUE filter of a chat list: the chat's
// metadata has Key, and its value is the string Value, or a number, true,
// false or null whose JSON text is Value.
type MetadataMatch struct {
	Key   string
	Value string
}

// Webhooks routes a chat's events to webhook endpoints and checks the
// webhooks of specs. internal/webhook implements it.
type Webhooks interface {
	spec.WebhookChecker
	// Route returns the deliveries of evs, events of a chat of the tenant
	// whose spec's webhook is hook (nil: none): what the append writes to
	// the outbox with them. It is called for every append, and returns nil
	// without allocating when no event goes anywhere.
	Route(tenant string, hook *spec.Webhook, evs []Event) []Delivery
	// Queued tells the dispatcher that deliveries were committed, so that
	// it need not wait for its next poll.
	Queued()
}

// Delivery sources: whose secret signs a delivery.
const (
	// DeliverySpec: the spec's own webhook, signed with the server's secret.
	DeliverySpec = "spec"
	// DeliveryTenant: a tenant endpoint of the webhooks file, signed with
	// its own secret (else the server's).
	DeliveryTenant = "tenant"
)

// Delivery is one webhook delivery an append (or a create) writes to the
// outbox together with its event, in the same transaction.
type Delivery struct {
	Seq    int64
	Event  EventType
	URL    string
	Source string
}

// DeliveryStatus is where a delivery stands. The strings are part of the API.
type DeliveryStatus string

// The delivery statuses.
const (
	DeliveryPending   DeliveryStatus = "pending"
	DeliveryDelivered DeliveryStatus = "delivered"
	DeliveryFailed    DeliveryStatus = "failed"
)

// DeliveryRecord is a delivery as the outbox holds it.
type DeliveryRecord struct {
	ChatID string
	Seq    int64
	URL    string
	Event  EventType
	Tenant string
	Source string
	Status DeliveryStatus
	// Attempts counts the claims of the delivery by a dispatcher (the
	// fencing token of FinishDelivery and MarkDeliverySent), Sent the
	// requests sent: a dispatcher that dies between its claim and its
	// request leaves one more claim, not one more request.
	Attempts int
	Sent     int
	// SentBy names the replica (its owner name) that sent the latest
	// request; "" before the first.
	SentBy string
	// LastStatusCode is the HTTP status of the last answer; 0 when none
	// came (no attempt yet, or the request failed).
	LastStatusCode int
	LastError      string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	// NextAttemptAt is when a pending delivery is due (or, while an
	// attempt is under way, when it may be taken over).
	NextAttemptAt time.Time
	DeliveredAt   *time.Time
}

// WebhookID is the delivery's Standard Webhooks id, the same on every
// attempt: "<chat_id>.<seq>".
func (d *DeliveryRecord) WebhookID() string {
	return WebhookID(d.ChatID, d.Seq)
}

// WebhookID is the Standard Webhooks id of an event's deliveries.
func WebhookID(chatID string, seq int64) string {
	return chatID + "." + strconv.FormatInt(seq, 10)
}

// ClaimedDelivery is a due delivery taken for one attempt, with its event.
type ClaimedDelivery struct {
	DeliveryRecord
	Event Event
	// Disabled: the endpoint answered 410 Gone to an earlier delivery of
	// this chat; this one is to be failed without a request.
	Disabled bool
}

// PatchMetadataParams are the arguments of Store.PatchMetadata.
type PatchMetadataParams struct {
	Tenant string
	ChatID string
	// Patch is merged into the metadata: a key with the JSON null removes
	// that key, any other value sets it.
	Patch map[string]json.RawMessage
	// MaxBytes bounds the merged metadata's JSON.
	MaxBytes int
}

// EraseChatParams are the arguments of Store.EraseChat.
type EraseChatParams struct {
	Tenant string // "" matches any tenant
	ChatID string
	Now    time.Time
}

// EraseEndedParams are the arguments of Store.EraseEnded.
type EraseEndedParams struct {
	// EndedBefore: chats that ended before this time are erased.
	EndedBefore time.Time
	Limit       int
	Now         time.Time
}

// PutTeamParams are the arguments of Store.PutTeam.
type PutTeamParams struct {
	Tenant string
	Name   string
	Spec   json.RawMessage
	Now    time.Time
}

// ListTeamsParams are the arguments of Store.ListTeams.
type ListTeamsParams struct {
	Tenant string
	Limit  int
	Cursor string
}

// ListDeliveriesParams are the arguments of Store.ListDeliveries.
type ListDeliveriesParams struct {
	ChatID string
	// After lists the deliveries of events after this seq.
	After int64
	Limit int
}

// ClaimDeliveriesParams are the arguments of Store.ClaimDeliveries.
type ClaimDeliveriesParams struct {
	Now time.Time
	// LeaseUntil is when a claimed delivery becomes due again if its
	// attempt is never recorded (the replica died during it).
	LeaseUntil time.Time
	Limit      int
}

// MarkDeliverySentParams record that a claimed delivery's request is about
// to be sent.
type MarkDeliverySentParams struct {
	ChatID string
	Seq    int64
	URL    string
	// Attempts is the delivery's attempt count as the claim left it.
	Attempts int
	// Owner names the replica sending it.
	Owner string
	Now   time.Time
}

// FinishDeliveryParams record the outcome of one attempt.
type FinishDeliveryParams struct {
	ChatID string
	Seq    int64
	URL    string
	// Attempts is the delivery's attempt count as the claim left it: a
	// record of an attempt that was taken over meanwhile changes nothing.
	Attempts       int
	Status         DeliveryStatus
	LastStatusCode int
	LastError      string
	// NextAttemptAt is when a pending delivery is tried again.
	NextAttemptAt time.Time
	Now           time.Time
	// DisableURL fails the chat's other pending deliveries to the URL (the
	// endpoint answered 410 Gone).
	DisableURL bool
}

// AppStore is the part of Store that serves docs/backend.md.
type AppStore interface {
	// PatchMetadata merges p.Patch into a chat's metadata atomically and
	// returns the chat as it is afterwards; ErrMetadataTooLarge when the
	// result would exceed p.MaxBytes (nothing is written).
	PatchMetadata(ctx context.Context, p *PatchMetadataParams) (*Chat, error)
	// EraseChat removes an ended chat (its events, spec, metadata and every
	// row that names it) and leaves a tombstone of its id; ErrChatActive if
	// it has not ended, ErrNotFound if there is no such chat of the tenant.
	EraseChat(ctx context.Context, p *EraseChatParams) error
	// EraseEnded erases up to p.Limit chats that ended before
	// p.EndedBefore and returns their ids. Several replicas may call it at
	// once: one of them erases, the others get nothing.
	EraseEnded(ctx context.Context, p *EraseEndedParams) ([]string, error)
	// PutTeam stores a new version (the latest plus one) of a saved team,
	// unless p.Spec is the latest version's: then that one is returned and
	// created is false.
	PutTeam(ctx context.Context, p *PutTeamParams) (t *Team, created bool, err error)
	// GetTeam returns a version of a tenant's team, the latest for version
	// 0, or ErrTeamNotFound.
	GetTeam(ctx context.Context, tenant, name string, version int) (*Team, error)
	// ListTeams returns the latest version of each of the tenant's teams,
	// by name, and the cursor of the next page ("" on the last).
	ListTeams(ctx context.Context, p *ListTeamsParams) ([]*Team, string, error)
	// ListDeliveries returns the webhook deliveries of a chat's events, by
	// seq and URL.
	ListDeliveries(ctx context.Context, p *ListDeliveriesParams) ([]DeliveryRecord, error)
	// ClaimDeliveries takes up to p.Limit due pending deliveries for an
	// attempt: their attempt count goes up by one and they are not due
	// again before p.LeaseUntil. Concurrent callers never get the same
	// delivery.
	ClaimDeliveries(ctx context.Context, p *ClaimDeliveriesParams) ([]ClaimedDelivery, error)
	// MarkDeliverySent counts a request of a claimed delivery as sent by
	// p.Owner, just before it is sent, if the delivery's attempt count is
	// still p.Attempts; else it is ErrFenced (the claim was taken over
	// and the request must not go out).
	MarkDeliverySent(ctx context.Context, p *MarkDeliverySentParams) error
	// FinishDelivery records an attempt's outcome, if the delivery's
	// attempt count is still p.Attempts.
	FinishDelivery(ctx context.Context, p *FinishDeliveryParams) error
}
