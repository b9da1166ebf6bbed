-- 0005: agentd as an application's backend (docs/backend.md), mirroring
-- migrations/postgres/0005_backend.sql: the webhook outbox, search by
-- name and team, erasure with tombstones and retention, saved teams.
--
-- Differences from Postgres, and why:
--   * No index on metadata: SQLite has no GIN. Its store is single-node;
--     a metadata filter walks the list's index newest first and tests each
--     chat's metadata with json_each until the page is full.
--   * Erasure has no stored function to run it (SQLite has none). Its
--     equivalent is the store's EraseChat transaction, which first writes
--     the chat's id to chat_erasures and removes it again before it
--     commits: the triggers let a DELETE of a chat's rows through only
--     while that row is there and the chat has ended. Every other UPDATE or
--     DELETE of events, and every DELETE of chats, is still refused.

ALTER TABLE chats ADD COLUMN team_name TEXT;
ALTER TABLE chats ADD COLUMN team_version INTEGER CHECK (team_version IS NULL OR team_version > 0);
CREATE INDEX chats_tenant_name_created_idx ON chats (tenant, name, created_at DESC, id DESC)
    WHERE name IS NOT NULL;
CREATE INDEX chats_tenant_team_created_idx ON chats (tenant, team_name, created_at DESC, id DESC)
    WHERE team_name IS NOT NULL;

-- Retention finds ended chats oldest first.
CREATE INDEX chats_ended_idx ON chats (completed_at)
    WHERE status IN ('completed', 'failed', 'cancelled');

CREATE TABLE chat_tombstones (
    id         TEXT PRIMARY KEY NOT NULL,
    tenant     TEXT NOT NULL,
    deleted_at INTEGER NOT NULL
) STRICT;

CREATE TABLE teams (
    tenant     TEXT NOT NULL,
    name       TEXT NOT NULL,
    version    INTEGER NOT NULL CHECK (version > 0),
    spec       TEXT NOT NULL CHECK (json_valid(spec)),
    created_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, name, version)
) STRICT;

CREATE TABLE webhook_deliveries (
    chat_id          TEXT NOT NULL,
    seq              INTEGER NOT NULL,
    url              TEXT NOT NULL,
    tenant           TEXT NOT NULL,
    event            TEXT NOT NULL,
    source           TEXT NOT NULL CHECK (source IN ('spec', 'tenant')),
    status           TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    last_status_code INTEGER,
    last_error       TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    next_attempt_at  INTEGER NOT NULL,
    delivered_at     INTEGER,
    PRIMARY KEY (chat_id, seq, url)
) STRICT;
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at)
    WHERE status = 'pending';

-- The chat being erased, while its EraseChat transaction runs; empty
-- otherwise.
CREATE TABLE chat_erasures (
    chat_id TEXT PRIMARY KEY NOT NULL
) STRICT;

DROP TRIGGER events_no_delete;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
WHEN NOT EXISTS (SELECT 1 FROM chat_erasures e JOIN chats c ON c.id = e.chat_id
                 WHERE e.chat_id = OLD.chat_id AND c.status IN ('completed', 'failed', 'cancelled'))
BEGIN
    SELECT RAISE(ABORT, 'events is append-only: DELETE is not allowed (only the erasure of a whole ended chat)');
END;

DROP TRIGGER chats_no_delete;
CREATE TRIGGER chats_no_delete BEFORE DELETE ON chats
WHEN NOT EXISTS (SELECT 1 FROM chat_erasures e
                 WHERE e.chat_id = OLD.id AND OLD.status IN ('completed', 'failed', 'cancelled'))
BEGIN
    SELECT RAISE(ABORT, 'chats is never deleted: events rely on it: DELETE is not allowed (only the erasure of a whole ended chat)');
END;
