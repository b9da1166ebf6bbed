-- 0009: a chat's context variables are the fold of its context.updated
-- events (docs/context-variables.md), which GET /v1/chats/{id} reads. This
-- partial index holds those events only, so the read costs what the chat's
-- changes of variables cost, not what its whole log does (a chat of 2,000
-- events took about 1 ms through the primary key), and no other append
-- writes it. Building it reads the events table once.
CREATE INDEX events_context_updated_idx ON events (chat_id, seq) WHERE type = 'context.updated';
