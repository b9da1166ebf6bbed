package chat

import (
	"context"
	"errors"
)

// This file holds the part of Store that serves agentd as an application's
// backend (docs/backend.md), and its errors; the types of each feature are
// in teams.go, deliveries.go, metadata.go and erasure.go.

// Errors of the application-backend features.
var (
	// ErrChatActive: the chat has not ended, and the operation (erasure)
	// needs an ended chat.
	ErrChatActive = errors.New("the chat has not ended")
	// ErrRunActive: a run of the chat is active or waits to start, and
	// the change (of its context variables) is made between runs only.
	ErrRunActive = errors.New("a run of the chat is active or about to start")
	// ErrTeamNotFound: no saved team (or version) of that name for the tenant.
	ErrTeamNotFound = errors.New("team not found")
	// ErrMetadataTooLarge: metadata merged with a patch would be larger
	// than the limit.
	ErrMetadataTooLarge = errors.New("metadata too large")
)

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
