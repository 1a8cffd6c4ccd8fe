-- Why each sandbox ended. Set with the move to 'destroying' when the
-- service decides (a destroy, expiry, a surplus warm VM), else with the
-- move to 'destroyed' or 'failed'; a row in either of those states always
-- has one. out_of_memory is recorded only when the console shows the guest
-- kernel gave up for lack of memory; any other stop from inside is
-- guest_shutdown (docs/sandboxes.md).
ALTER TABLE sandboxes ADD COLUMN end_reason text
    CHECK (end_reason IN ('destroyed', 'expired', 'guest_shutdown', 'out_of_memory',
                          'boot_failed', 'host_lost', 'pool_surplus'));

-- Rows that ended before the column existed: what can still be told.
UPDATE sandboxes SET end_reason = CASE
    WHEN state = 'destroyed' AND expires_at IS NOT NULL AND destroying_at >= expires_at
        THEN 'expired'
    WHEN state = 'destroyed' THEN 'destroyed'
    WHEN ready_at IS NULL THEN 'boot_failed'
    ELSE 'guest_shutdown' END
    WHERE state IN ('destroyed', 'failed');

ALTER TABLE sandboxes ADD CONSTRAINT sandboxes_ended_has_reason
    CHECK (state NOT IN ('destroyed', 'failed') OR end_reason IS NOT NULL);
