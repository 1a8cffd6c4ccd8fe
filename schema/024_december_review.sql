-- An MCP session is bound to the credential that made it (or that first
-- used it, for one opened without a key): "k:" and 32 hex digits of the
-- API key's SHA-256, or "g:" and the OAuth grant's id, so a refreshed
-- access token keeps its session. NULL for anonymous sessions, and for
-- sessions made before this column (bound to their account alone).
ALTER TABLE mcp_sessions ADD COLUMN credential text
    CHECK (credential ~ '^(k:[0-9a-f]{32}|g:[0-9a-f-]{36})$');
