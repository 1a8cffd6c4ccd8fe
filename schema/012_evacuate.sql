-- Evacuation: `aasctl host evacuate` sets evacuating (and draining); the
-- aasd that serves the host live-migrates its sandboxes to other hosts one
-- at a time. While one moves, moving_to names its new host and counts its
-- reservation there too (hosts_reserve), and move_owner the aasd moving
-- it, so reconcile on either host leaves it alone while that aasd lives.
-- A sandbox that could not move keeps running where it is, with the
-- reason in move_error, until the next evacuate asks again.
ALTER TABLE hosts ADD COLUMN evacuating boolean NOT NULL DEFAULT false;
ALTER TABLE hosts ADD COLUMN evacuating_since timestamptz;
-- The sandbox isolation rule the operator installed on the host, as the
-- SHA-256 of its text (`aasd --netguard-rules-hash`). Sandboxes with a
-- network device go only to hosts whose recorded hash is the one of the
-- rule aasd would install now, or to aasd's own machine (qemu:///), where
-- aasd checks the rule itself.
-- Where a host's VMs keep their disks: 'shared' (the host sees aasd's
-- files at the same paths: this machine, or a shared file system), 'pool'
-- (its own libvirt storage pool, the image uploaded there), or NULL: shared
-- for a libvirt of this machine, pool for any other.
ALTER TABLE hosts ADD COLUMN storage text CHECK (storage IN ('shared', 'pool'));
ALTER TABLE hosts ADD COLUMN isolation_rule text CHECK (isolation_rule ~ '^[0-9a-f]{64}$');
ALTER TABLE sandboxes ADD COLUMN moving_to text CHECK (length(moving_to) <= 255);
ALTER TABLE sandboxes ADD COLUMN move_owner text;
ALTER TABLE sandboxes ADD COLUMN move_error text CHECK (length(move_error) <= 300);
ALTER TABLE sandboxes ADD COLUMN moved_at timestamptz;
ALTER TABLE sandboxes ADD COLUMN moved_from text CHECK (length(moved_from) <= 255);
-- How long the guest was paused at the switch of its last move (libvirt's
-- downtime); NULL when not known.
ALTER TABLE sandboxes ADD COLUMN move_pause_ms integer CHECK (move_pause_ms >= 0);
CREATE INDEX sandboxes_moving_idx ON sandboxes (moving_to) WHERE moving_to IS NOT NULL;
