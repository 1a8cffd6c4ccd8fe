-- Self-service: a password (argon2id, its parameters inside the encoded
-- text), a verified e-mail, dashboard sessions, one-time links sent by
-- mail, an outbox so a mail server outage loses nothing, and failed
-- attempts counted for rate limits and lockouts.
ALTER TABLE accounts
    ADD COLUMN password_hash text CHECK (length(password_hash) <= 200),
    ADD COLUMN email_verified_at timestamptz;

-- Accounts made by the operator vouch for their address.
UPDATE accounts SET email_verified_at = created_at;

-- Sign-up stores addresses in lower case; older rows are matched the same way.
CREATE INDEX accounts_email_lower_idx ON accounts (lower(email));

-- A session id is shown to the browser once (its cookie) and stored as
-- its hex SHA-256; `csrf` is the token every form of the session carries.
CREATE TABLE web_sessions (
    id_hash      text PRIMARY KEY CHECK (id_hash ~ '^[0-9a-f]{64}$'),
    account_id   uuid NOT NULL REFERENCES accounts(id),
    csrf         text NOT NULL CHECK (csrf ~ '^[0-9a-f]{64}$'),
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    ended_at     timestamptz
);
CREATE INDEX web_sessions_account_idx ON web_sessions (account_id) WHERE ended_at IS NULL;

-- Links sent by mail: verification, password reset. Single use.
CREATE TABLE email_links (
    token_hash  text PRIMARY KEY CHECK (token_hash ~ '^[0-9a-f]{64}$'),
    account_id  uuid NOT NULL REFERENCES accounts(id),
    purpose     text NOT NULL CHECK (purpose IN ('verify', 'reset')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz
);
CREATE INDEX email_links_account_idx ON email_links (account_id, purpose);

-- Mail waits here until an SMTP server took it; the body (which holds a
-- one-time link) is blanked once sent.
CREATE TABLE mail_outbox (
    id              bigserial PRIMARY KEY,
    account_id      uuid REFERENCES accounts(id),
    to_addr         text NOT NULL CHECK (length(to_addr) BETWEEN 3 AND 254),
    subject         text NOT NULL CHECK (length(subject) <= 200),
    body            text NOT NULL CHECK (length(body) <= 20000),
    created_at      timestamptz NOT NULL DEFAULT now(),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text CHECK (length(last_error) <= 300),
    sent_at         timestamptz
);
CREATE INDEX mail_outbox_due_idx ON mail_outbox (next_attempt_at) WHERE sent_at IS NULL;

-- Events counted against a limit: "login:<email>", "login-ip:<address>",
-- "signup-ip:<address>", "mail:<account>"... Rows older than a day go.
CREATE TABLE auth_events (
    subject text NOT NULL CHECK (length(subject) <= 300),
    at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX auth_events_idx ON auth_events (subject, at);

-- Payments: each provider event handled once (its id), and the credit of
-- each paid checkout posted once (the ledger's idempotency key
-- "pay:<provider>:<checkout id>").
CREATE TABLE payment_events (
    provider    text NOT NULL CHECK (provider IN ('stripe')),
    event_id    text NOT NULL CHECK (length(event_id) BETWEEN 1 AND 255),
    kind        text NOT NULL CHECK (length(kind) <= 100),
    account_id  uuid REFERENCES accounts(id),
    checkout_id text CHECK (length(checkout_id) <= 255),
    amount      bigint CHECK (amount >= 0),
    credited    boolean NOT NULL DEFAULT false,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, event_id)
);
