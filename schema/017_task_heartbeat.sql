-- A working task's aasd marks it alive every few seconds; one whose mark
-- is old ran on an aasd that stopped (its outcome is lost), and it is
-- then reported failed instead of working until it expires.
ALTER TABLE mcp_tasks ADD COLUMN heartbeat_at timestamptz NOT NULL DEFAULT now();
