-- 0013: a new chat's spec goes to chat_specs, and its chats row holds the
-- JSON text null in spec (no spec is null: a spec is an object), so that
-- reads take chat_specs' row. A spec is some kilobytes and a chats row is
-- rewritten by every append of its chat: with the spec inside it a row
-- filled a page of its own (and more), so a group commit's appends to 20
-- chats dirtied 20 pages of chats and wrote each to the WAL. Without it,
-- the rows of the chats that run together share a few pages. Chats created
-- before keep their spec where it is (moving them would rewrite the table
-- while the server upgrades).
CREATE TABLE chat_specs (
    id   TEXT PRIMARY KEY NOT NULL,
    spec TEXT NOT NULL CHECK (json_valid(spec))
) STRICT;

-- As chats: deleted only with its chat, by the erasure of a whole ended chat.
CREATE TRIGGER chat_specs_no_delete BEFORE DELETE ON chat_specs
WHEN NOT EXISTS (SELECT 1 FROM chat_erasures e JOIN chats c ON c.id = e.chat_id
                 WHERE e.chat_id = OLD.id AND c.status IN ('completed', 'failed', 'cancelled'))
BEGIN
    SELECT RAISE(ABORT, 'chat_specs is never deleted: DELETE is not allowed (only the erasure of a whole ended chat)');
END;
