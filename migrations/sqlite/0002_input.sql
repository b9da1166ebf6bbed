-- 0002: human input, mirroring migrations/postgres/0002_input.sql.
ALTER TABLE chats ADD COLUMN input_response TEXT CHECK (input_response IS NULL OR json_valid(input_response));
ALTER TABLE chats ADD COLUMN input_expires_at INTEGER;
