-- 0004: runs (docs/runs.md), mirroring migrations/postgres/0004_runs.sql.
ALTER TABLE chats ADD COLUMN run INTEGER NOT NULL DEFAULT 1 CHECK (run >= 1);
ALTER TABLE chats ADD COLUMN last_run INTEGER NOT NULL DEFAULT 1;
ALTER TABLE chats ADD COLUMN stop_requested INTEGER NOT NULL DEFAULT 0 CHECK (stop_requested IN (0, 1));
ALTER TABLE chats ADD COLUMN forked_from TEXT;
ALTER TABLE chats ADD COLUMN forked_at_seq INTEGER;

CREATE TABLE chat_runs (
    chat_id    TEXT NOT NULL REFERENCES chats (id),
    run        INTEGER NOT NULL CHECK (run >= 2),
    key        TEXT NOT NULL,
    request    TEXT NOT NULL CHECK (json_valid(request)),
    created_at INTEGER NOT NULL,
    PRIMARY KEY (chat_id, run)
) STRICT;
