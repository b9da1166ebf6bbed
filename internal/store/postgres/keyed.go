package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/store/internal/param"
)

// rowQuerier is what both a pool and a transaction offer for one row.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Answered implements chat.Store.
func (s *Store) Answered(ctx context.Context, k *chat.KeyedRequest) (*chat.Answer, error) {
	a, err := findAnswer(ctx, s.pool, k)
	if err == nil && a == nil {
		err = param.NotAnswered(k)
	}
	return a, err
}

// findAnswer reads the answer stored for k: nil if none, ErrConflict if
// it answered another request.
func findAnswer(ctx context.Context, q rowQuerier, k *chat.KeyedRequest) (*chat.Answer, error) {
	cid, ok := param.ChatID(k.ChatID)
	if !ok {
		return nil, nil
	}
	var (
		hash   string
		answer []byte
	)
	err := q.QueryRow(ctx, `SELECT r.request_hash, r.answer FROM chat_requests r JOIN chats c ON c.id = r.chat_id
		WHERE r.chat_id = $1 AND r.op = $2 AND r.key = $3 AND ($4 = '' OR c.tenant = $4)`,
		cid, k.Op, k.Key, k.Tenant).Scan(&hash, &answer)
	if errors.Is(err, pgx.ErrNoRows) {
		return param.Answer(k, false, "", nil)
	}
	if err != nil {
		return nil, fmt.Errorf("answer of %s key %q on chat %s: %w", k.Op, k.Key, cid, translate(err))
	}
	return param.Answer(k, true, hash, answer)
}

// checkKeyed is the start of a write that carries k (nil: none): nil if
// the key is fresh, else the *chat.AnsweredError or ErrConflict the write
// returns without writing. The caller holds the chat's state row (or
// relies on the primary key: of two transactions that insert one key,
// the second fails with ErrConflict, and its caller asks Answered).
func checkKeyed(ctx context.Context, tx pgx.Tx, k *chat.KeyedRequest) error {
	if k == nil {
		return nil
	}
	return param.Repeat(findAnswer(ctx, tx, k))
}

// storeAnswer records the answer of k (nil: none) in the write's
// transaction.
func storeAnswer(ctx context.Context, tx pgx.Tx, k *chat.KeyedRequest, c *chat.Chat, run int, now time.Time) error {
	if k == nil {
		return nil
	}
	b, err := chat.EncodeAnswer(c, run)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO chat_requests (chat_id, op, key, request_hash, answer, created_at) VALUES ($1, $2, $3, $4, $5, $6)`,
		k.ChatID, k.Op, k.Key, k.RequestHash, b, now); err != nil {
		return fmt.Errorf("store the answer of %s key %q: %w", k.Op, k.Key, translate(err))
	}
	return nil
}
