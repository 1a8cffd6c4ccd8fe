-- Disabled accounts: `aasctl account disable` sets accounts.disabled_at,
-- revokes the keys and ends the sessions; every aasd's reaper then stops
-- the account's running sandboxes, which end for this reason.
ALTER TABLE sandboxes DROP CONSTRAINT sandboxes_end_reason_check;
ALTER TABLE sandboxes ADD CONSTRAINT sandboxes_end_reason_check
    CHECK (end_reason IN ('destroyed', 'expired', 'guest_shutdown', 'out_of_memory',
                          'boot_failed', 'host_lost', 'pool_surplus', 'account_disabled'));

-- The reaper looks for running sandboxes of disabled accounts on every
-- round; disabled accounts are few.
CREATE INDEX accounts_disabled_idx ON accounts (id) WHERE disabled_at IS NOT NULL;
