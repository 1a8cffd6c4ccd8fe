-- Bounds on MCP sessions: anonymous ones expire soon and are deleted, an
-- account's open sessions are counted. Partial indexes keep both cheap.
CREATE INDEX mcp_sessions_anon_idx ON mcp_sessions (last_seen_at)
    WHERE account_id IS NULL;
CREATE INDEX mcp_sessions_account_idx ON mcp_sessions (account_id, last_seen_at)
    WHERE account_id IS NOT NULL AND ended_at IS NULL;
