package chat

import (
	"strconv"
	"time"

	"github.com/agentd/agentd/internal/spec"
)

// Webhook deliveries: a chat's events sent to its endpoints, each
// delivery claimed, attempted and recorded by the store.

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
