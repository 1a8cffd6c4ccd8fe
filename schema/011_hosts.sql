-- Hypervisor hosts, shared by every aasd. A sandbox reserves its size's
-- memory and vCPUs on its host while it is live (creating, running,
-- destroying); a host's reservations are the sum over its live rows, so no
-- counter can drift. A create locks the candidate host rows (in id order,
-- after the account row) in the transaction that inserts its sandbox, so two
-- aasd never reserve past a host's limit. Capacity and live use are written
-- by the aasd that polls the host.
CREATE TABLE hosts (
    id                serial PRIMARY KEY,
    -- Printable, no space, quote or backslash: a safe metrics label value.
    name              text NOT NULL UNIQUE CHECK (name ~ '^[!#-\[\]-~]{1,255}$'),
    uri               text NOT NULL UNIQUE CHECK (length(uri) BETWEEN 1 AND 255),
    state             text NOT NULL DEFAULT 'up' CHECK (state IN ('up', 'degraded', 'down')),
    state_since       timestamptz NOT NULL DEFAULT now(),
    draining          boolean NOT NULL DEFAULT false,
    -- Added by the operator (aasctl host add): every aasd opens it. A host
    -- only registered from an aasd's AAS_LIBVIRT_URI is that aasd's alone
    -- (a local URI means another machine to another aasd).
    shared            boolean NOT NULL DEFAULT false,
    memory_overcommit double precision NOT NULL DEFAULT 1 CHECK (memory_overcommit > 0 AND memory_overcommit <= 16),
    cpu_overcommit    double precision NOT NULL DEFAULT 16 CHECK (cpu_overcommit > 0 AND cpu_overcommit <= 64),
    preview_address   text CHECK (length(preview_address) <= 64),
    -- From libvirt; NULL until the host was first seen.
    memory_mib        bigint,
    vcpus             integer,
    free_memory_mib   bigint,
    cpu_busy          double precision,         -- 0..1 of all its CPUs, over the last poll interval
    disk_free_mib     bigint,        -- where the overlays live; NULL when not known
    domains           integer,
    seen_at           timestamptz,
    last_error        text,
    added_at          timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE sandboxes ADD COLUMN reserved_memory_mib integer NOT NULL DEFAULT 0
    CHECK (reserved_memory_mib >= 0);
ALTER TABLE sandboxes ADD COLUMN reserved_vcpus integer NOT NULL DEFAULT 0
    CHECK (reserved_vcpus >= 0);
