package postgres

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/store/internal/param"
)

// maxClaim caps one Claim; a caller asking for more gets more next time.
const maxClaim = 1000

// claimSQL picks and leases runnable chats in one statement (one implicit
// transaction).
//
// Why FOR UPDATE SKIP LOCKED: every replica polls this query. Plain FOR
// UPDATE would make a second claimer block on the rows the first has locked
// until it commits, then re-check them and (finding the new lease) drop
// them: replicas would claim one after another and come back short. SKIP
// LOCKED makes each claimer pass over rows another transaction holds, so
// concurrent claimers get disjoint chats without waiting (one that finds all
// of its few candidates taken comes back short and takes more next time).
// It also skips a chat whose row an append is updating right now: that chat
// has a working owner, and if its lease has in fact expired the next poll
// takes it. Rows that were committed by another claimer after this
// statement's snapshot are re-checked against the WHERE clause when locked
// (READ COMMITTED), so a chat is never claimed twice.
//
// Which chats, in which order: the oldest runnable ones first, found without
// sorting every live chat. The candidates come from three partial indexes
// (migrations 0003 and 0004), each read in its own order and only as far
// as the limit: chats no one owns (new ones, handed back), oldest first;
// owned chats whose lease expired (their owner crashed), by expiry,
// stopping at the first live lease; chats awaiting input that need a
// worker; and ended chats with a run waiting to start. Only those few
// candidates are sorted by age, then locked and re-checked.
const claimSQL = `WITH candidates AS (
	(SELECT id, created_at FROM chat_state
	 WHERE owner IS NULL AND status IN ('queued', 'running')
	 ORDER BY created_at, id LIMIT $2)
	UNION ALL
	(SELECT id, created_at FROM chat_state
	 WHERE owner IS NOT NULL AND lease_expires_at < $1 AND ` + needsWorker + `
	 ORDER BY lease_expires_at LIMIT $2)
	UNION ALL
	(SELECT id, created_at FROM chat_state
	 WHERE owner IS NULL AND status = 'awaiting_input' AND ` + needsWorker + `
	 ORDER BY created_at, id LIMIT $2)
	UNION ALL
	(SELECT id, created_at FROM chat_state
	 WHERE owner IS NULL AND status IN ('completed', 'failed', 'cancelled') AND last_run > run
	 ORDER BY created_at, id LIMIT $2)
), picked AS (
	SELECT id FROM chat_state
	WHERE id IN (SELECT id FROM candidates ORDER BY created_at, id LIMIT $2)
	  AND ` + needsWorker + `
	  AND (lease_expires_at IS NULL OR lease_expires_at < $1)
	FOR UPDATE SKIP LOCKED
), claimed AS (
	UPDATE chat_state AS s SET owner = $3, lease_expires_at = $4, epoch = s.epoch + 1
	FROM picked WHERE s.id = picked.id
	RETURNING s.*
)
SELECT ` + chatColumns + ` FROM chats c JOIN claimed s ON s.id = c.id`

// needsWorker: a queued or running chat always needs a worker; a chat
// awaiting input only to act on a cancel or stop request, an answer or an
// expired request; an ended chat only to start its next run. (Storing an
// answer makes a chat running; an answered chat still awaiting input is one
// that an earlier version answered.)
const needsWorker = `(status IN ('queued', 'running')
	OR (status = 'awaiting_input' AND (cancel_requested OR stop_requested OR input_response IS NOT NULL OR input_expires_at < $1))
	OR (status IN ('completed', 'failed', 'cancelled') AND last_run > run))`

// Claim implements chat.Store.
func (s *Store) Claim(ctx context.Context, p *chat.ClaimParams) ([]*chat.Chat, error) {
	if p.Owner == "" {
		return nil, fmt.Errorf("claim chats: %w: no owner", param.ErrInvalid)
	}
	if p.Limit <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, claimSQL, p.Now, min(p.Limit, maxClaim), p.Owner, p.LeaseUntil)
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

// renewSQL extends, in one statement, the leases of the chats whose rows it
// can lock now, and says for each row it locked whether the lease was still
// the caller's.
//
// Why SKIP LOCKED: an append batch locks the rows of its chats and holds
// them until its commit, in whatever order its plan visits them. A renewal
// that waited for a row while holding others could close a cycle with such
// a batch; Postgres then breaks the deadlock only after deadlock_timeout,
// stalling every chat of the batch for that long and failing one side. So
// this statement waits for nothing: a row an append holds right now is left
// out, and RenewLeases renews it alone, one row per statement, which holds
// no other lock while it waits.
const renewSQL = `WITH locked AS (
	SELECT s.id, l.epoch, s.epoch = l.epoch AND s.owner = $4 AS held, s.cancel_requested, s.stop_requested
	FROM chat_state s JOIN unnest($2::uuid[], $3::bigint[]) AS l(id, epoch) ON s.id = l.id
	FOR NO KEY UPDATE OF s SKIP LOCKED
), renewed AS (
	UPDATE chat_state AS c SET lease_expires_at = $1
	FROM locked WHERE c.id = locked.id AND locked.held
)
SELECT id::text, epoch, held, cancel_requested, stop_requested FROM locked`

// renewOneSQL renews the lease of one chat whose row renewSQL found locked.
const renewOneSQL = `UPDATE chat_state SET lease_expires_at = $1
	WHERE id = $2 AND epoch = $3 AND owner = $4
	RETURNING cancel_requested, stop_requested`

// RenewLeases implements chat.Store, in one statement for all leases but
// those whose rows are being written right now (see renewSQL). A lease is
// held while the chat's owner and epoch are still the caller's: any claim by
// someone else bumps the epoch, so renewing a lease that expired but was not
// taken over is safe.
func (s *Store) RenewLeases(ctx context.Context, p *chat.RenewLeasesParams) ([]chat.LeaseState, error) {
	states := make([]chat.LeaseState, len(p.Leases))
	for i, l := range p.Leases {
		states[i].ChatID, states[i].Epoch = l.ChatID, l.Epoch
	}
	if len(p.Leases) == 0 {
		return states, nil
	}
	if p.Owner == "" {
		return nil, fmt.Errorf("renew leases: %w: no owner", param.ErrInvalid)
	}
	type key struct {
		id    string
		epoch int64
	}
	type answer struct{ held, cancel, stop bool }
	var (
		ids    []string
		uuids  [][16]byte
		epochs []int64
	)
	for _, l := range p.Leases {
		if id, ok := param.ChatID(l.ChatID); ok { // other ids cannot be held
			u, _ := param.UUID(id)
			ids, uuids, epochs = append(ids, id), append(uuids, u), append(epochs, l.Epoch)
		}
	}
	rows, err := s.pool.Query(ctx, renewSQL, p.LeaseUntil, uuids, epochs, p.Owner)
	if err != nil {
		return nil, fmt.Errorf("renew leases of %s: %w", p.Owner, translate(err))
	}
	answers := map[key]answer{}
	var k key
	var a answer
	_, err = pgx.ForEachRow(rows, []any{&k.id, &k.epoch, &a.held, &a.cancel, &a.stop}, func() error {
		answers[k] = a
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("renew leases of %s: %w", p.Owner, translate(err))
	}
	// The rows left out were locked by a write in progress (or are gone).
	for i, id := range ids {
		k := key{id, epochs[i]}
		if _, ok := answers[k]; ok {
			continue
		}
		var cancel, stop bool
		err := s.pool.QueryRow(ctx, renewOneSQL, p.LeaseUntil, id, epochs[i], p.Owner).Scan(&cancel, &stop)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			answers[k] = answer{}
		case err != nil:
			return nil, fmt.Errorf("renew lease of chat %s for %s: %w", id, p.Owner, translate(err))
		default:
			answers[k] = answer{held: true, cancel: cancel, stop: stop}
		}
	}
	for i, l := range p.Leases {
		id, _ := param.ChatID(l.ChatID)
		if a := answers[key{id, l.Epoch}]; a.held {
			states[i].Held, states[i].CancelRequested, states[i].StopRequested = true, a.cancel, a.stop
		}
	}
	return states, nil
}

// ReleaseLease implements chat.Store. The epoch stays: the next Claim bumps it.
func (s *Store) ReleaseLease(ctx context.Context, l chat.Lease, owner string) error {
	id, ok := param.ChatID(l.ChatID)
	if !ok || owner == "" {
		return nil // no such lease can be held
	}
	if _, err := s.pool.Exec(ctx, `UPDATE chat_state SET owner = NULL, lease_expires_at = NULL
		WHERE id = $1 AND epoch = $2 AND owner = $3`, id, l.Epoch, owner); err != nil {
		return fmt.Errorf("release lease of chat %s for %s: %w", id, owner, translate(err))
	}
	return nil
}
