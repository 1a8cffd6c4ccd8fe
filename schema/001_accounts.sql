-- Accounts and their API keys. A key is stored only as the hex SHA-256 of
-- its text; `prefix` (the first characters) lets a person tell keys apart.
CREATE TABLE accounts (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    email       text NOT NULL UNIQUE CHECK (length(email) BETWEEN 3 AND 254),
    created_at  timestamptz NOT NULL DEFAULT now(),
    disabled_at timestamptz
);

CREATE TABLE api_keys (
    id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    account_id   uuid NOT NULL REFERENCES accounts(id),
    key_hash     text NOT NULL UNIQUE CHECK (key_hash ~ '^[0-9a-f]{64}$'),
    prefix       text NOT NULL,
    name         text NOT NULL DEFAULT '' CHECK (length(name) <= 100),
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);

CREATE INDEX api_keys_account_idx ON api_keys (account_id);
