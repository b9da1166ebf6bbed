package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/store/internal/param"
)

// maxClaim caps one Claim; a caller asking for more gets more next time.
const maxClaim = 1000

// Claim implements chat.Store. One UPDATE picks and leases the chats: SQLite
// runs it under the database's write lock, so there is nothing like
// Postgres' SKIP LOCKED to do: concurrent claimers simply take turns, and
// each sees the leases the previous one set.
func (s *Store) Claim(ctx context.Context, p *chat.ClaimParams) ([]*chat.Chat, error) {
	if p.Owner == "" {
		return nil, fmt.Errorf("claim chats: %w: no owner", param.ErrInvalid)
	}
	if p.Limit <= 0 {
		return nil, nil
	}
	rows, err := s.writer.QueryContext(ctx, `UPDATE chats
		SET owner = ?, lease_expires_at = ?, epoch = epoch + 1
		WHERE id IN (
			SELECT id FROM chats
			WHERE (status IN ('queued', 'running') OR (status = 'awaiting_input' AND
			      (cancel_requested = 1 OR stop_requested = 1 OR input_response IS NOT NULL OR input_expires_at < ?))
			      OR (status IN ('completed', 'failed', 'cancelled') AND last_run > run))
			  AND (lease_expires_at IS NULL OR lease_expires_at < ?)
			ORDER BY created_at, id
			LIMIT ?)
		RETURNING `+chatColumns,
		p.Owner, nanos(p.LeaseUntil), nanos(p.Now), nanos(p.Now), min(p.Limit, maxClaim))
	if err != nil {
		return nil, fmt.Errorf("claim chats for %s: %w", p.Owner, translate(err))
	}
	cs, err := scanChats(rows)
	if err != nil {
		return nil, fmt.Errorf("claim chats for %s: %w", p.Owner, translate(err))
	}
	// RETURNING has no defined order; callers get the oldest first.
	sort.Slice(cs, func(i, j int) bool {
		if !cs[i].CreatedAt.Equal(cs[j].CreatedAt) {
			return cs[i].CreatedAt.Before(cs[j].CreatedAt)
		}
		return cs[i].ID < cs[j].ID
	})
	return cs, nil
}

// RenewLeases implements chat.Store. A lease is held while the chat's owner
// and epoch are still the caller's: any claim by someone else bumps the
// epoch, so renewing a lease that expired but was not taken over is safe.
func (s *Store) RenewLeases(ctx context.Context, p *chat.RenewLeasesParams) ([]chat.LeaseState, error) {
	states := make([]chat.LeaseState, len(p.Leases))
	if len(p.Leases) == 0 {
		return states, nil
	}
	if p.Owner == "" {
		return nil, fmt.Errorf("renew leases: %w: no owner", param.ErrInvalid)
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("renew leases of %s: %w", p.Owner, err)
	}
	defer tx.Rollback() // a no-op after Commit
	stmt, err := tx.PrepareContext(ctx, `UPDATE chats SET lease_expires_at = ?
		WHERE id = ? AND epoch = ? AND owner = ? RETURNING cancel_requested, stop_requested`)
	if err != nil {
		return nil, fmt.Errorf("renew leases of %s: %w", p.Owner, err)
	}
	defer stmt.Close()
	for i, l := range p.Leases {
		states[i].ChatID, states[i].Epoch = l.ChatID, l.Epoch
		id, ok := param.ChatID(l.ChatID)
		if !ok {
			continue
		}
		var cancel, stop int64
		err := stmt.QueryRowContext(ctx, nanos(p.LeaseUntil), id, l.Epoch, p.Owner).Scan(&cancel, &stop)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("renew lease of chat %s for %s: %w", id, p.Owner, translate(err))
		}
		states[i].Held, states[i].CancelRequested, states[i].StopRequested = true, cancel != 0, stop != 0
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("renew leases of %s: commit: %w", p.Owner, err)
	}
	return states, nil
}

// ReleaseLease implements chat.Store. The epoch stays: the next Claim bumps it.
func (s *Store) ReleaseLease(ctx context.Context, l chat.Lease, owner string) error {
	id, ok := param.ChatID(l.ChatID)
	if !ok || owner == "" {
		return nil // no such lease can be held
	}
	if _, err := s.writer.ExecContext(ctx, `UPDATE chats SET owner = NULL, lease_expires_at = NULL
		WHERE id = ? AND epoch = ? AND owner = ?`, id, l.Epoch, owner); err != nil {
		return fmt.Errorf("release lease of chat %s for %s: %w", id, owner, translate(err))
	}
	return nil
}
