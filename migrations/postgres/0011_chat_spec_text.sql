-- 0011: a chat's spec is stored as the text agentd writes (it has parsed,
-- checked and compacted the spec before), in spec_text. As jsonb, Postgres
-- parsed it again on every create: about 50 µs for a 5 KB spec, a third of
-- the create statement, for a column that is only ever read back whole.
-- Changing spec's type would rewrite chats and every index of it under an
-- exclusive lock while the server upgrades, so the chats created before
-- keep their spec where it is, and reads take spec_text, else spec.
ALTER TABLE chats ALTER COLUMN spec DROP NOT NULL, ADD COLUMN spec_text text;
-- NOT VALID: the rows there are all have spec; new rows are checked.
ALTER TABLE chats ADD CONSTRAINT chats_spec_present CHECK (spec IS NOT NULL OR spec_text IS NOT NULL) NOT VALID;
