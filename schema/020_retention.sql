-- Retention: every row kind with an expiry is deleted once it is over
-- (service/purge.c, in batches), and an account's task results are
-- bounded in bytes (AAS_TASK_BYTES_PER_ACCOUNT). stored_bytes is what a
-- task counts against that bound: its result's bytes and a fixed share
-- for the row; while it runs, the most its result may take.
ALTER TABLE mcp_tasks ADD COLUMN stored_bytes bigint NOT NULL DEFAULT 0
    CHECK (stored_bytes >= 0);
UPDATE mcp_tasks SET stored_bytes = 1024 + coalesce(octet_length(result::text), 0);
CREATE INDEX mcp_tasks_expires_idx ON mcp_tasks (expires_at);
CREATE INDEX email_links_expires_idx ON email_links (expires_at);
CREATE INDEX auth_events_at_idx ON auth_events (at);
CREATE INDEX mail_outbox_created_idx ON mail_outbox (created_at);
