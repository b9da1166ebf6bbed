-- 0003: the version in which migrations/postgres/0003_chat_state.sql moves
-- the per-append columns of Postgres's chats into a narrow table and drops
-- the events foreign key. SQLite keeps its schema: it rewrites a row's page
-- either way, has no HOT or WAL-per-row concerns of that kind, and its
-- foreign key check is one index probe in the same process. What both stores
-- share is the rule the Postgres change relies on: chats are never deleted.
CREATE TRIGGER chats_no_delete BEFORE DELETE ON chats
BEGIN
    SELECT RAISE(ABORT, 'chats is never deleted: events rely on it: DELETE is not allowed');
END;
