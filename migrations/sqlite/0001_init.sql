-- 0001: chats, the append-only events log and the messages view (docs/architecture.md),
-- mirroring migrations/postgres/0001_init.sql.
--
-- Differences from Postgres, and why:
--   * STRICT tables, so SQLite enforces the column types like Postgres does.
--   * Times are INTEGER unix nanoseconds (UTC). Integers order and compare
--     correctly (lease_expires_at < now, ORDER BY created_at), unlike RFC 3339
--     text, whose variable-width fraction breaks lexical order.
--   * JSON is TEXT with a json_valid CHECK, standing in for jsonb's validation.
--   * Booleans are INTEGER 0/1.
--   * Ids are TEXT holding canonical (lower-case) UUIDs, so text order equals
--     Postgres' uuid order and cursors behave the same in both stores.

CREATE TABLE chats (
    id                TEXT PRIMARY KEY NOT NULL,
    tenant            TEXT NOT NULL,
    name              TEXT,
    spec              TEXT NOT NULL CHECK (json_valid(spec)),
    metadata          TEXT CHECK (metadata IS NULL OR json_valid(metadata)),
    status            TEXT NOT NULL CHECK (status IN
                          ('queued', 'running', 'awaiting_input', 'completed', 'failed', 'cancelled')),
    stop_reason       TEXT,
    stop_detail       TEXT,
    error             TEXT,
    last_seq          INTEGER NOT NULL DEFAULT 0 CHECK (last_seq >= 0),
    turns             INTEGER NOT NULL DEFAULT 0,
    message_count     INTEGER NOT NULL DEFAULT 0,
    prompt_tokens     INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    pending_input     TEXT CHECK (pending_input IS NULL OR json_valid(pending_input)),
    idempotency_key   TEXT,
    request_hash      TEXT,
    cancel_requested  INTEGER NOT NULL DEFAULT 0 CHECK (cancel_requested IN (0, 1)),
    owner             TEXT,
    lease_expires_at  INTEGER,
    epoch             INTEGER NOT NULL DEFAULT 0,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    completed_at      INTEGER,
    UNIQUE (tenant, idempotency_key)
) STRICT;

-- Listing: newest first by (created_at, id), per tenant, optionally per status.
CREATE INDEX chats_tenant_created_idx ON chats (tenant, created_at DESC, id DESC);
CREATE INDEX chats_tenant_status_created_idx ON chats (tenant, status, created_at DESC, id DESC);
CREATE INDEX chats_created_idx ON chats (created_at DESC, id DESC);

-- Claiming: non-terminal chats without a live lease; partial so that it only
-- grows with the live chats.
CREATE INDEX chats_claim_idx ON chats (status, lease_expires_at)
    WHERE status IN ('queued', 'running', 'awaiting_input');

CREATE TABLE events (
    chat_id        TEXT NOT NULL REFERENCES chats (id),
    seq            INTEGER NOT NULL CHECK (seq > 0),
    type           TEXT NOT NULL,
    role           TEXT,
    name           TEXT,
    content        TEXT,
    tool_calls     TEXT CHECK (tool_calls IS NULL OR json_valid(tool_calls)),
    tool_responses TEXT CHECK (tool_responses IS NULL OR json_valid(tool_responses)),
    data           TEXT CHECK (data IS NULL OR json_valid(data)),
    created_at     INTEGER NOT NULL,
    PRIMARY KEY (chat_id, seq)
) STRICT; -- a rowid table: rows can be large (message content), which WITHOUT ROWID handles badly

-- Append-only, enforced by the database. SQLite has only row triggers, so an
-- UPDATE or DELETE is rejected as soon as it touches a row; one that matches
-- no rows changes nothing anyway.
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'events is append-only: UPDATE is not allowed');
END;

CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'events is append-only: DELETE is not allowed');
END;

CREATE VIEW messages AS
    SELECT chat_id, seq, role, name, content, tool_calls, tool_responses, data, created_at
    FROM events
    WHERE type = 'message';
