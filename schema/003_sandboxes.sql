-- Sandboxes and their commands. A row exists before its VM does; the VM's
-- domain is named after the row ("aas-" || id) on the host in host_uri.
CREATE TABLE aasd_instances (
    id           text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{32}$'),
    host_uris    text NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE sandboxes (
    id             text PRIMARY KEY CHECK (id ~ '^sbx-[a-z0-9]{16}$'),
    account_id     uuid REFERENCES accounts(id),          -- NULL while in the warm pool
    in_pool        boolean NOT NULL DEFAULT false,
    name           text CHECK (length(name) <= 63),
    metadata       jsonb NOT NULL DEFAULT '{}'::jsonb,
    size           text NOT NULL CHECK (size IN ('small', 'medium', 'large')),
    host_uri       text NOT NULL,
    domain_name    text NOT NULL UNIQUE,
    accelerator    text CHECK (accelerator IN ('kvm', 'tcg')),
    state          text NOT NULL CHECK (state IN ('creating', 'running', 'destroying', 'destroyed', 'failed')),
    failure_reason text,
    owner          text,                                   -- aasd instance driving a transition
    timeout_minutes integer NOT NULL CHECK (timeout_minutes > 0),
    created_at     timestamptz NOT NULL DEFAULT now(),
    ready_at       timestamptz,
    claimed_at     timestamptz,
    expires_at     timestamptz,
    destroying_at  timestamptz,
    destroyed_at   timestamptz,
    failed_at      timestamptz,
    CHECK (in_pool OR account_id IS NOT NULL OR state IN ('destroyed', 'failed'))
);

CREATE INDEX sandboxes_account_idx ON sandboxes (account_id, created_at DESC);
CREATE INDEX sandboxes_live_idx ON sandboxes (host_uri) WHERE state IN ('creating', 'running', 'destroying');
CREATE INDEX sandboxes_pool_idx ON sandboxes (size, created_at) WHERE in_pool AND state = 'running';

CREATE TABLE sandbox_commands (
    id           text PRIMARY KEY CHECK (id ~ '^cmd-[a-z0-9]{16}$'),
    sandbox_id   text NOT NULL REFERENCES sandboxes(id),
    command      text NOT NULL,
    background   boolean NOT NULL,
    guest_pid    bigint,
    state        text NOT NULL CHECK (state IN ('running', 'exited', 'timed_out', 'failed')),
    exit_code    integer,
    stdout_path  text NOT NULL,
    stderr_path  text NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    ended_at     timestamptz
);

CREATE INDEX sandbox_commands_sandbox_idx ON sandbox_commands (sandbox_id, started_at DESC);
