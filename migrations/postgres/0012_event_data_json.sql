-- 0012: an event's data is stored as json (the text agentd wrote, checked
-- to be JSON) in data_json, no longer built into jsonb: Postgres parsed it
-- into its binary form on every append, about 1.8 µs for the ~100 bytes of
-- a message's data against 0.8 µs for the check alone, and nothing reads
-- it but whole. As with the spec (0011), rewriting the column's type would
-- rewrite the log under an exclusive lock while the server upgrades, so the
-- events written before keep their data in data, and reads take data_json,
-- else data.
ALTER TABLE events ADD COLUMN data_json json;
-- The view keeps its columns and their types.
DROP VIEW messages;
CREATE VIEW messages AS
    SELECT chat_id, seq, role, name, content, tool_calls, tool_responses,
        coalesce(data_json::jsonb, data) AS data, created_at
    FROM events
    WHERE type = 'message';
