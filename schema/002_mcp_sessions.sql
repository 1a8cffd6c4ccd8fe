-- MCP Streamable HTTP sessions. Kept here, not in process memory, so any
-- aasd on the same database can serve a session another one created.
CREATE TABLE mcp_sessions (
    id               text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{64}$'),
    protocol_version text NOT NULL,
    account_id       uuid REFERENCES accounts(id),
    client_name      text NOT NULL DEFAULT '' CHECK (length(client_name) <= 200),
    client_version   text NOT NULL DEFAULT '' CHECK (length(client_version) <= 100),
    created_at       timestamptz NOT NULL DEFAULT now(),
    last_seen_at     timestamptz NOT NULL DEFAULT now(),
    ended_at         timestamptz
);

CREATE INDEX mcp_sessions_live_idx ON mcp_sessions (last_seen_at) WHERE ended_at IS NULL;
