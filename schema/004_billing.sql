-- Credits. Money is integer micro-USD. The ledger is append-only; an
-- account's balance is the sum of its entries, cached in accounts.balance
-- and updated in the same transaction as every entry (a test checks both).
ALTER TABLE accounts
    ADD COLUMN balance bigint NOT NULL DEFAULT 0 CHECK (balance >= 0);

CREATE TABLE ledger (
    id              bigserial PRIMARY KEY,
    account_id      uuid NOT NULL REFERENCES accounts(id),
    sandbox_id      text REFERENCES sandboxes(id),
    kind            text NOT NULL CHECK (kind IN ('grant', 'charge', 'refund', 'adjustment')),
    amount          bigint NOT NULL,
    minutes         integer,
    reason          text NOT NULL CHECK (length(reason) BETWEEN 1 AND 500),
    idempotency_key text NOT NULL UNIQUE,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CHECK ((kind = 'charge' AND amount <= 0) OR (kind IN ('grant', 'refund') AND amount >= 0)
           OR kind = 'adjustment')
);

CREATE INDEX ledger_account_idx ON ledger (account_id, id DESC);

-- What each sandbox paid for and what it got back. settled_at is set once,
-- in the transaction that writes its refund.
ALTER TABLE sandboxes
    ADD COLUMN price_per_minute bigint NOT NULL DEFAULT 0 CHECK (price_per_minute >= 0),
    ADD COLUMN paid_minutes integer NOT NULL DEFAULT 0 CHECK (paid_minutes >= 0),
    ADD COLUMN charged bigint NOT NULL DEFAULT 0,
    ADD COLUMN refunded bigint NOT NULL DEFAULT 0,
    ADD COLUMN minutes_used integer,
    ADD COLUMN settled_at timestamptz;

CREATE INDEX sandboxes_expiry_idx ON sandboxes (expires_at)
    WHERE state = 'running' AND NOT in_pool;
