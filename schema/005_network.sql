-- Sandbox networking and preview ports.
-- net: the network device the VM was booted with. 'nat' reaches the
-- internet through user-mode NAT, 'isolated' has a device for forwarded
-- ports but no route out, 'none' has no device (the host could not
-- enforce isolation, or networking is off).
ALTER TABLE sandboxes ADD COLUMN net text NOT NULL DEFAULT 'none'
    CHECK (net IN ('nat', 'isolated', 'none'));

CREATE TABLE sandbox_ports (
    sandbox_id   text NOT NULL REFERENCES sandboxes(id),
    port         integer NOT NULL CHECK (port BETWEEN 1 AND 65535),
    public       boolean NOT NULL,
    -- The forward QEMU listens on, on the loopback of the VM's host.
    host_port    integer NOT NULL CHECK (host_port BETWEEN 1 AND 65535),
    -- Private previews: SHA-256 (hex) of the token; the token itself is
    -- shown once. Signed URLs are HMACs keyed by this hash.
    token_hash   text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sandbox_id, port),
    CHECK (public OR token_hash IS NOT NULL)
);
CREATE INDEX sandbox_ports_pool_idx ON sandboxes (size, net, created_at) WHERE in_pool AND state = 'running';
