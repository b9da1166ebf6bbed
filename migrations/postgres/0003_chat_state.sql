-- 0003: what every append changes moves out of the chats row into a narrow
-- row of its own (chat_state), and events lose their foreign key.
--
-- Why: an append updated the whole chats row, spec and all (~1.6 KB inline),
-- so every append wrote a new version of it to the WAL, and often on
-- another page (the row seldom fitted beside its old version: no HOT
-- update, new index entries too). chat_state holds only the counters,
-- status, fencing and lease columns (~150 bytes), is filled to half its
-- pages so that the new version of a row fits beside the old one, and no
-- index covers a column that an ordinary append changes (last_seq, turns,
-- message_count, tokens, updated_at): those appends are HOT updates. chats
-- keeps what never changes after create (tenant, name, spec, metadata,
-- idempotency key, created_at).

CREATE TABLE chat_state (
    id                uuid PRIMARY KEY REFERENCES chats (id),
    status            text NOT NULL CHECK (status IN
                          ('queued', 'running', 'awaiting_input', 'completed', 'failed', 'cancelled')),
    stop_reason       text,
    stop_detail       text,
    error             text,
    last_seq          bigint NOT NULL DEFAULT 0 CHECK (last_seq >= 0),
    turns             int NOT NULL DEFAULT 0,
    message_count     int NOT NULL DEFAULT 0,
    prompt_tokens     bigint NOT NULL DEFAULT 0,
    completion_tokens bigint NOT NULL DEFAULT 0,
    pending_input     jsonb,
    input_response    jsonb,
    input_expires_at  timestamptz,
    cancel_requested  boolean NOT NULL DEFAULT false,
    owner             text,
    lease_expires_at  timestamptz,
    epoch             bigint NOT NULL DEFAULT 0,
    -- A copy of chats.created_at, which never changes: claims take the
    -- oldest runnable chats first without reading chats.
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    completed_at      timestamptz
) WITH (fillfactor = 50);

INSERT INTO chat_state (id, status, stop_reason, stop_detail, error, last_seq, turns, message_count,
        prompt_tokens, completion_tokens, pending_input, input_response, input_expires_at, cancel_requested,
        owner, lease_expires_at, epoch, created_at, updated_at, completed_at)
    SELECT id, status, stop_reason, stop_detail, error, last_seq, turns, message_count,
        prompt_tokens, completion_tokens, pending_input, input_response, input_expires_at, cancel_requested,
        owner, lease_expires_at, epoch, created_at, updated_at, completed_at
    FROM chats;

-- Dropping the columns drops the indexes on them (chats_claim_idx,
-- chats_tenant_status_created_idx).
ALTER TABLE chats
    DROP COLUMN status, DROP COLUMN stop_reason, DROP COLUMN stop_detail, DROP COLUMN error,
    DROP COLUMN last_seq, DROP COLUMN turns, DROP COLUMN message_count,
    DROP COLUMN prompt_tokens, DROP COLUMN completion_tokens, DROP COLUMN pending_input,
    DROP COLUMN input_response, DROP COLUMN input_expires_at, DROP COLUMN cancel_requested,
    DROP COLUMN owner, DROP COLUMN lease_expires_at, DROP COLUMN epoch,
    DROP COLUMN updated_at, DROP COLUMN completed_at;

-- Claiming (see Claim in internal/store/postgres/lease.go) reads three small
-- partial indexes, each in the order it needs, instead of sorting every live
-- chat: chats that no one owns (new, handed back), oldest first; owned
-- chats by lease expiry, of which only the expired head is read; and chats
-- awaiting input, which need a worker only for a cancel, an answer or an
-- expired request. Only status and owner changes (a few per chat) and lease
-- renewals touch these indexes.
CREATE INDEX chat_state_unowned_idx ON chat_state (created_at, id)
    WHERE owner IS NULL AND status IN ('queued', 'running');
CREATE INDEX chat_state_lease_idx ON chat_state (lease_expires_at)
    WHERE owner IS NOT NULL AND status IN ('queued', 'running', 'awaiting_input');
CREATE INDEX chat_state_awaiting_idx ON chat_state (created_at, id)
    WHERE owner IS NULL AND status = 'awaiting_input';
-- ListChats by status.
CREATE INDEX chat_state_status_created_idx ON chat_state (status, created_at DESC, id DESC);

-- events.chat_id loses its foreign key. The check cost a row lock (FOR KEY
-- SHARE, written to the WAL) on the chat and a lookup per inserted event.
-- The invariant "every event belongs to an existing chat" holds without it:
--   * events are inserted by exactly two statements: the append, which
--     inserts only the rows joined to the chat_state row its fenced UPDATE
--     changed in the same statement (no chat, no update, no events), and
--     the create, which inserts the chat, its chat_state row and its first
--     events in one statement;
--   * chats and chat_state rows are never deleted, which the triggers below
--     enforce (chat_state references chats, so a chat with state cannot go
--     either way).
ALTER TABLE events DROP CONSTRAINT events_chat_id_fkey;

CREATE FUNCTION chats_not_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is never deleted: events rely on it: % is not allowed', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation';
END;
$$;

CREATE TRIGGER chats_not_deleted
    BEFORE DELETE OR TRUNCATE ON chats
    FOR EACH STATEMENT EXECUTE FUNCTION chats_not_deleted();
CREATE TRIGGER chat_state_not_deleted
    BEFORE DELETE OR TRUNCATE ON chat_state
    FOR EACH STATEMENT EXECUTE FUNCTION chats_not_deleted();
