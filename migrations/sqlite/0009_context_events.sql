-- 0009: the partial index of a chat's context.updated events (see
-- migrations/postgres/0009_context_events.sql).
CREATE INDEX events_context_updated_idx ON events (chat_id, seq) WHERE type = 'context.updated';
