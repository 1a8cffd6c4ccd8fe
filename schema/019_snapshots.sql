-- Snapshots and forks (docs/sandboxes.md#snapshots-and-forks). A snapshot
-- is a running sandbox's memory and disk kept on its host, owned by the
-- account; create_sandbox from_snapshot starts a new sandbox from it.
-- 'snapshotting' is the sandbox's state while its VM is saved and
-- restored, owned by the aasd doing it, so reconcile finishes it.
ALTER TABLE sandboxes DROP CONSTRAINT sandboxes_state_check;
ALTER TABLE sandboxes ADD CONSTRAINT sandboxes_state_check
    CHECK (state IN ('creating', 'running', 'destroying', 'destroyed', 'failed',
                     'pausing', 'paused', 'resuming', 'snapshotting'));

-- How its VM started: a cold boot of its kernel, a claim from the warm
-- pool, a restore of the image's booted snapshot, or a restore of the
-- account's snapshot from_snapshot.
ALTER TABLE sandboxes
    ADD COLUMN boot text NOT NULL DEFAULT 'cold'
        CHECK (boot IN ('cold', 'pool', 'image_snapshot', 'snapshot')),
    ADD COLUMN from_snapshot text CHECK (from_snapshot ~ '^snp-[a-z0-9]{16}$');

DROP INDEX sandboxes_live_idx;
CREATE INDEX sandboxes_live_idx ON sandboxes (host_uri)
    WHERE state IN ('creating', 'running', 'destroying', 'pausing', 'paused', 'resuming',
                    'snapshotting');

-- 'saving' while its files are written (the source sandbox is
-- 'snapshotting'), 'ready' once whole, 'deleted' when its files are gone.
-- Storage for keep_minutes is charged when it is taken, at storage_price;
-- a delete before expires_at gives back the whole minutes not begun.
CREATE TABLE snapshots (
    id             text PRIMARY KEY CHECK (id ~ '^snp-[a-z0-9]{16}$'),
    account_id     uuid NOT NULL REFERENCES accounts(id),
    name           text CHECK (length(name) <= 63),
    sandbox_id     text NOT NULL REFERENCES sandboxes(id),
    host_uri       text NOT NULL,
    size           text NOT NULL CHECK (size IN ('small', 'medium', 'large')),
    network        text NOT NULL,
    image          text NOT NULL,
    state          text NOT NULL CHECK (state IN ('saving', 'ready', 'deleted')),
    bytes          bigint NOT NULL DEFAULT 0 CHECK (bytes >= 0),
    keep_minutes   integer NOT NULL CHECK (keep_minutes > 0),
    storage_price  bigint NOT NULL CHECK (storage_price >= 0),
    charged        bigint NOT NULL DEFAULT 0 CHECK (charged >= 0),
    refunded       bigint NOT NULL DEFAULT 0 CHECK (refunded >= 0),
    created_at     timestamptz NOT NULL DEFAULT now(),
    ready_at       timestamptz,
    expires_at     timestamptz NOT NULL,
    deleted_at     timestamptz,
    end_reason     text CHECK (end_reason IN ('deleted', 'expired', 'failed', 'image_changed'))
);

CREATE INDEX snapshots_account_idx ON snapshots (account_id, created_at DESC);
CREATE INDEX snapshots_live_idx ON snapshots (expires_at) WHERE state <> 'deleted';
