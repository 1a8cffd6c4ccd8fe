-- A sandbox whose guest agent broke the protocol (oversized or malformed
-- frames, output beyond what aasd granted) is destroyed: its agent
-- connection cannot be trusted again. failure_reason keeps what it did.
ALTER TABLE sandboxes DROP CONSTRAINT sandboxes_end_reason_check;
ALTER TABLE sandboxes ADD CONSTRAINT sandboxes_end_reason_check
    CHECK (end_reason IN ('destroyed', 'expired', 'guest_shutdown', 'out_of_memory',
                          'boot_failed', 'host_lost', 'pool_surplus', 'account_disabled',
                          'agent_protocol'));
