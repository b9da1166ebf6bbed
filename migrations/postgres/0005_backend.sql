-- 0005: agentd as an application's backend (docs/backend.md): the webhook
-- outbox, search by metadata, name and team, erasure with tombstones and
-- retention, saved teams.

-- Search. A chat records the saved team it was created from. metadata is
-- filtered by containment (metadata @> '{"key": "value"}'), which a GIN
-- index with jsonb_path_ops serves: the smallest and fastest GIN opclass
-- for @>, and the only operator the list uses. Name and team filters have
-- btree indexes in the list's order, so that a page of them is an index
-- range like the unfiltered list.
ALTER TABLE chats
    ADD COLUMN team_name text,
    ADD COLUMN team_version int CHECK (team_version > 0);
CREATE INDEX chats_metadata_idx ON chats USING gin (metadata jsonb_path_ops);
CREATE INDEX chats_tenant_name_created_idx ON chats (tenant, name, created_at DESC, id DESC)
    WHERE name IS NOT NULL;
CREATE INDEX chats_tenant_team_created_idx ON chats (tenant, team_name, created_at DESC, id DESC)
    WHERE team_name IS NOT NULL;

-- Retention finds ended chats oldest first. Partial: live chats are not in
-- it, and an ordinary append (which changes neither status nor
-- completed_at) stays a HOT update.
CREATE INDEX chat_state_ended_idx ON chat_state (completed_at)
    WHERE status IN ('completed', 'failed', 'cancelled');

-- Erasure leaves a tombstone per erased chat: its id answers 404 from then
-- on and is never given to another chat (CreateChat checks).
CREATE TABLE chat_tombstones (
    id         uuid PRIMARY KEY,
    tenant     text NOT NULL,
    deleted_at timestamptz NOT NULL
);

-- Saved teams: immutable versions 1, 2, … of a chat spec without a task,
-- per tenant and name.
CREATE TABLE teams (
    tenant     text NOT NULL,
    name       text NOT NULL,
    version    int NOT NULL CHECK (version > 0),
    spec       jsonb NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, name, version)
);

-- The webhook outbox: one row per event and endpoint, inserted by the
-- append (or create) that writes the event, in the same statement, so an
-- event is delivered at least once if and only if it was committed. The
-- primary key orders a chat's deliveries for GET /deliveries; the partial
-- index is what a dispatcher claims from, and holds only pending rows.
CREATE TABLE webhook_deliveries (
    chat_id          uuid NOT NULL,
    seq              bigint NOT NULL,
    url              text NOT NULL,
    tenant           text NOT NULL,
    event            text NOT NULL,
    source           text NOT NULL CHECK (source IN ('spec', 'tenant')),
    status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         int NOT NULL DEFAULT 0,
    last_status_code int,
    last_error       text,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    next_attempt_at  timestamptz NOT NULL,
    delivered_at     timestamptz,
    PRIMARY KEY (chat_id, seq, url)
);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at)
    WHERE status = 'pending';

-- Erasure. The log stays append-only for every statement but the DELETEs of
-- agentd_erase_chat, which erases a whole chat that has ended: the
-- triggers of 0001 and 0003 now let a DELETE through only when the
-- function that runs it is agentd_erase_chat. They tell from the PL/pgSQL
-- call stack (GET DIAGNOSTICS … PG_CONTEXT), whose third line names the
-- function that ran the statement; a GUC or a marker row would let any
-- session that sets it delete what it likes. UPDATE and TRUNCATE stay
-- refused always.
CREATE FUNCTION agentd_erasing() RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    stack text;
BEGIN
    GET DIAGNOSTICS stack = PG_CONTEXT;
    -- Line 1 is this function, line 2 the trigger function, line 3 the
    -- statement, line 4 the function that ran it.
    RETURN split_part(stack, E'\n', 4) LIKE 'PL/pgSQL function %agentd_erase_chat(%';
END;
$$;

CREATE OR REPLACE FUNCTION events_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND agentd_erasing() THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'events is append-only: % is not allowed (erase a whole ended chat with agentd_erase_chat)', TG_OP
        USING ERRCODE = 'restrict_violation';
END;
$$;

CREATE OR REPLACE FUNCTION chats_not_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND agentd_erasing() THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION '% is never deleted: events rely on it: % is not allowed (erase a whole ended chat with agentd_erase_chat)', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'restrict_violation';
END;
$$;

-- agentd_erase_chat erases one chat of for_tenant ('' for any tenant) if
-- it has ended, and returns 'erased'; else 'active' (not ended, or a run
-- of it queued or starting) or
-- 'missing' (no such chat), changing nothing. The row lock on its
-- chat_state row waits for, and then excludes, anything that would start
-- the chat again; the tombstone records the erasure (the audit trail).
CREATE FUNCTION agentd_erase_chat(chat uuid, for_tenant text, at timestamptz) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    st     text;
    ten    text;
    owned  boolean;
    queued boolean;
BEGIN
    SELECT s.status, c.tenant, s.owner IS NOT NULL, s.last_run > s.run INTO st, ten, owned, queued
        FROM chat_state s JOIN chats c ON c.id = s.id
        WHERE s.id = chat AND (for_tenant = '' OR c.tenant = for_tenant)
        FOR UPDATE OF s;
    IF NOT FOUND THEN
        RETURN 'missing';
    END IF;
    -- Ended means: its latest run ended, no run waits to start, and no
    -- worker holds it (one that is starting the next run does).
    IF st NOT IN ('completed', 'failed', 'cancelled') OR owned OR queued THEN
        RETURN 'active';
    END IF;
    DELETE FROM events WHERE chat_id = chat;
    DELETE FROM webhook_deliveries WHERE chat_id = chat;
    DELETE FROM chat_runs WHERE chat_id = chat;
    DELETE FROM chat_state WHERE id = chat;
    DELETE FROM chats WHERE id = chat;
    INSERT INTO chat_tombstones (id, tenant, deleted_at) VALUES (chat, ten, at)
        ON CONFLICT (id) DO NOTHING;
    RETURN 'erased';
END;
$$;
