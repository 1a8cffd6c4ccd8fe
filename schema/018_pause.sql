-- Pause and resume (docs/sandboxes.md#pause-and-resume). A paused sandbox
-- has no VM: its memory is saved in its VM directory and its disk stays.
-- 'pausing' and 'resuming' are the moves between, owned by the aasd doing
-- them (owner), so reconcile finishes a move whose aasd stopped.
ALTER TABLE sandboxes DROP CONSTRAINT sandboxes_state_check;
ALTER TABLE sandboxes ADD CONSTRAINT sandboxes_state_check
    CHECK (state IN ('creating', 'running', 'destroying', 'destroyed', 'failed',
                     'pausing', 'paused', 'resuming'));

-- Compute is billed for the time the VM ran: ready_at to the end, less the
-- pauses. paused_at: when the current pause began (NULL while running);
-- paused_ms: the length of the pauses that ended. Storage is billed while
-- paused at storage_price per minute, for the minutes since storage_from,
-- at each resume and at the end. pauses and resumes number the ledger
-- entries of each (their idempotency keys); resume_charge is the compute a
-- resume under way paid, given back when it fails.
ALTER TABLE sandboxes
    ADD COLUMN paused_at timestamptz,
    ADD COLUMN paused_ms bigint NOT NULL DEFAULT 0 CHECK (paused_ms >= 0),
    ADD COLUMN pauses integer NOT NULL DEFAULT 0 CHECK (pauses >= 0),
    ADD COLUMN resumes integer NOT NULL DEFAULT 0 CHECK (resumes >= 0),
    ADD COLUMN storage_price bigint NOT NULL DEFAULT 0 CHECK (storage_price >= 0),
    ADD COLUMN storage_from timestamptz,
    ADD COLUMN resume_charge bigint NOT NULL DEFAULT 0 CHECK (resume_charge >= 0),
    ADD COLUMN resume_minutes integer NOT NULL DEFAULT 0 CHECK (resume_minutes >= 0);

DROP INDEX sandboxes_live_idx;
CREATE INDEX sandboxes_live_idx ON sandboxes (host_uri)
    WHERE state IN ('creating', 'running', 'destroying', 'pausing', 'paused', 'resuming');
DROP INDEX sandboxes_expiry_idx;
CREATE INDEX sandboxes_expiry_idx ON sandboxes (expires_at)
    WHERE state IN ('running', 'paused') AND NOT in_pool;
