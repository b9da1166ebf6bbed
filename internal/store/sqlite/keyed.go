package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentd/agentd/internal/chat"
	"github.com/agentd/agentd/internal/store/internal/param"
)

// rowQuerier is what both a database and a transaction offer for one row.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Answered implements chat.Store.
func (s *Store) Answered(ctx context.Context, k *chat.KeyedRequest) (*chat.Answer, error) {
	a, err := findAnswer(ctx, s.reader, k)
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
	err := q.QueryRowContext(ctx, `SELECT r.request_hash, r.answer FROM chat_requests r JOIN chats c ON c.id = r.chat_id
		WHERE r.chat_id = ? AND r.op = ? AND r.key = ? AND (? = '' OR c.tenant = ?)`,
		cid, k.Op, k.Key, k.Tenant, k.Tenant).Scan(&hash, &answer)
	if errors.Is(err, sql.ErrNoRows) {
		return param.Answer(k, false, "", nil)
	}
	if err != nil {
		return nil, fmt.Errorf("answer of %s key %q on chat %s: %w", k.Op, k.Key, cid, translate(err))
	}
	return param.Answer(k, true, hash, answer)
}

// checkKeyed is the start of a write that carries k (nil: none): nil if
// the key is fresh, else the *chat.AnsweredError or ErrConflict the write
// returns without writing. The single writer connection answers two
// requests with one key one after the other.
func checkKeyed(ctx context.Context, tx *sql.Tx, k *chat.KeyedRequest) error {
	if k == nil {
		return nil
	}
	return param.Repeat(findAnswer(ctx, tx, k))
}

// storeAnswer records the answer of k (nil: none) in the write's
// transaction.
func storeAnswer(ctx context.Context, tx *sql.Tx, k *chat.KeyedRequest, c *chat.Chat, run int, now time.Time) error {
	if k == nil {
		return nil
	}
	b, err := chat.EncodeAnswer(c, run)
	if err != nil {
		return err
	}
	cid, _ := param.ChatID(k.ChatID)
	if _, err := tx.ExecContext(ctx, `INSERT INTO chat_requests (chat_id, op, key, request_hash, answer, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		cid, k.Op, k.Key, k.RequestHash, b, nanos(now)); err != nil {
		return fmt.Errorf("store the answer of %s key %q: %w", k.Op, k.Key, translate(err))
	}
	return nil
}
