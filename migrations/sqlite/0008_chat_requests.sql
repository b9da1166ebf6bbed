-- 0008: the answers of keyed requests on a chat (POST /runs, /fork, /stop,
-- /input with an Idempotency-Key), as on Postgres
-- (migrations/postgres/0007_chat_requests.sql).
CREATE TABLE chat_requests (
    chat_id      TEXT NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    op           TEXT NOT NULL,
    key          TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    answer       BLOB NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (chat_id, op, key)
) STRICT;
