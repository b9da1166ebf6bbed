-- 0004: a chat is a conversation of runs (docs/runs.md), as AgentChat's
-- team.run is called again on the same team.
--
-- chat_state.run is the number of the chat's latest run (1 for a chat that
-- was never run again): every append writes it, from the log's run.started
-- events. last_run is the number of the latest run posted: a client posts
-- runs (POST /runs) while a worker appends the log, so what waits to start
-- is kept apart from the log, in chat_runs; last_run > run says that runs
-- wait (a cancel that drops them sets last_run back to run). Numbers are
-- never given out twice: a run an interrupt dropped leaves a gap.
-- stop_requested is POST /stop (AgentChat's ExternalTermination), cleared
-- with cancel_requested by the append that ends a run.
ALTER TABLE chat_state
    ADD COLUMN run int NOT NULL DEFAULT 1 CHECK (run >= 1),
    ADD COLUMN last_run int NOT NULL DEFAULT 1,
    ADD COLUMN stop_requested boolean NOT NULL DEFAULT false;

-- The runs posted after the first, with the request that posted each. A row
-- is written by POST /runs and read by the worker that starts the run; the
-- worker's append of run.started takes only while the row is still there
-- with its key, so a run that a cancel or an interrupt dropped (its row
-- deleted) never starts.
CREATE TABLE chat_runs (
    chat_id    uuid NOT NULL REFERENCES chats (id),
    run        int NOT NULL CHECK (run >= 2),
    key        uuid NOT NULL,
    request    jsonb NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (chat_id, run)
);

-- A fork (POST /fork) records where its log was copied from.
ALTER TABLE chats
    ADD COLUMN forked_from uuid,
    ADD COLUMN forked_at_seq bigint;

-- Claiming also finds ended chats with a run waiting to start (chats
-- awaiting input whose run was asked to stop come through
-- chat_state_awaiting_idx). Partial, so that the index holds only those
-- few rows.
CREATE INDEX chat_state_next_run_idx ON chat_state (created_at, id)
    WHERE owner IS NULL AND status IN ('completed', 'failed', 'cancelled') AND last_run > run;

-- An ended chat is owned while a worker starts its next run; if that worker
-- dies before the run starts, the lease runs out and the chat must be found
-- again. Leases are held only while a worker runs the chat, so the index of
-- owned chats by expiry needs no status in its predicate.
DROP INDEX chat_state_lease_idx;
CREATE INDEX chat_state_lease_idx ON chat_state (lease_expires_at) WHERE owner IS NOT NULL;
