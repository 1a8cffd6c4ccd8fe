-- MCP tasks (the io.modelcontextprotocol/tasks extension): a tool call run
-- in the background, its outcome kept until expires_at, readable by any
-- aasd on this database.
CREATE TABLE mcp_tasks (
    id               text PRIMARY KEY CHECK (id ~ '^task-[a-z0-9]{24}$'),
    account_id       uuid NOT NULL REFERENCES accounts(id),
    tool             text NOT NULL CHECK (length(tool) <= 64),
    status           text NOT NULL CHECK (status IN ('working', 'completed', 'failed', 'cancelled')),
    status_message   text CHECK (length(status_message) <= 500),
    result           jsonb,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    expires_at       timestamptz NOT NULL
);
CREATE INDEX mcp_tasks_account_idx ON mcp_tasks (account_id, created_at);
