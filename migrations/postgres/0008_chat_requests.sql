-- 0008: the answers of keyed requests on a chat.
--
-- POST /runs, /fork, /stop and /input take an Idempotency-Key: the answer
-- is stored here, in the transaction of what the request created, and a
-- repeat of the key (on any replica, after any crash) gets it again
-- without doing anything. Keys are scoped to the chat the request names
-- (so to its tenant) and to the operation. answer is bytes, not jsonb, so
-- a repeat's body is the first one's byte for byte. The rows go with
-- their chat when it is erased.
CREATE TABLE chat_requests (
    chat_id      uuid NOT NULL REFERENCES chats (id) ON DELETE CASCADE,
    op           text NOT NULL,
    key          text NOT NULL,
    request_hash text NOT NULL,
    answer       bytea NOT NULL,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (chat_id, op, key)
);
