-- 0002: human input (docs/runs.md). A client's answer to a pending input
-- request waits in input_response until the chat's next worker appends it to
-- the log (the worker is the only writer of the log, and a chat waiting for
-- input has no worker). input_expires_at lets Claim find chats whose
-- input_timeout_s ran out without reading pending_input's JSON.
ALTER TABLE chats
    ADD COLUMN input_response jsonb,
    ADD COLUMN input_expires_at timestamptz;
