-- 0006: on Postgres, the erasure check names agentd_erase_chat exactly
-- (migrations/postgres/0006_erase_exact.sql). SQLite has no stored
-- function to tell apart: its erasure is the store's EraseChat transaction
-- (0005), so nothing changes here; the version exists so that both stores
-- move through the same schema versions.
SELECT 1;
