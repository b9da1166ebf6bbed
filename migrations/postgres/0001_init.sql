-- 0001: chats, the append-only events log and the messages view (docs/architecture.md).
--
-- Empty strings of the Go types are stored as NULL in the optional text
-- columns, so that "no value" has one representation and the unique
-- constraint on (tenant, idempotency_key) ignores chats without a key (NULLs
-- are distinct in a UNIQUE constraint).

CREATE TABLE chats (
    id                uuid PRIMARY KEY,
    tenant            text NOT NULL,
    name              text,
    spec              jsonb NOT NULL,
    metadata          jsonb,
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
    idempotency_key   text,
    request_hash      text,
    cancel_requested  boolean NOT NULL DEFAULT false,
    owner             text,
    lease_expires_at  timestamptz,
    epoch             bigint NOT NULL DEFAULT 0,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    completed_at      timestamptz,
    UNIQUE (tenant, idempotency_key)
);

-- Listing is newest first by (created_at, id), per tenant, optionally per
-- status. The columns never change after insert (status rarely), so these
-- indexes cost little on the hot path, which updates last_seq and counters.
CREATE INDEX chats_tenant_created_idx ON chats (tenant, created_at DESC, id DESC);
CREATE INDEX chats_tenant_status_created_idx ON chats (tenant, status, created_at DESC, id DESC);
-- ListChats with tenant "" (every tenant).
CREATE INDEX chats_created_idx ON chats (created_at DESC, id DESC);

-- Claiming looks for non-terminal chats without a live lease. Partial, so that
-- the index stays as small as the set of live chats while finished chats pile
-- up in the table.
CREATE INDEX chats_claim_idx ON chats (status, lease_expires_at)
    WHERE status IN ('queued', 'running', 'awaiting_input');

CREATE TABLE events (
    -- No ON DELETE CASCADE: events are never deleted (see the trigger below).
    chat_id        uuid NOT NULL REFERENCES chats (id),
    seq            bigint NOT NULL CHECK (seq > 0),
    type           text NOT NULL,
    role           text,
    name           text,
    content        text,
    tool_calls     jsonb,
    tool_responses jsonb,
    data           jsonb,
    created_at     timestamptz NOT NULL,
    PRIMARY KEY (chat_id, seq)
);

-- The log is append-only, enforced by the database rather than by convention:
-- a bug or an operator's stray statement must not be able to rewrite what
-- clients have already seen. A statement-level trigger also rejects UPDATE and
-- DELETE statements that match no rows, and TRUNCATE, which row triggers miss.
CREATE FUNCTION events_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'events is append-only: % is not allowed', TG_OP
        USING ERRCODE = 'restrict_violation';
END;
$$;

CREATE TRIGGER events_append_only
    BEFORE UPDATE OR DELETE OR TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION events_append_only();

-- Messages are the events of type 'message', with their own columns.
CREATE VIEW messages AS
    SELECT chat_id, seq, role, name, content, tool_calls, tool_responses, data, created_at
    FROM events
    WHERE type = 'message';
