-- Account abuse bounds: the free credit counted per sign-up network, and
-- money taken back by refunds and disputes.

-- The network an account signed up from (IPv4 /24, IPv6 /48, as text),
-- so the free credit its verification grants is counted per network
-- (docs/billing.md#free-credit). NULL for accounts made by the operator.
ALTER TABLE accounts ADD COLUMN signup_net text CHECK (length(signup_net) <= 64);

-- Money a provider takes back (docs/billing.md#refunds-and-disputes): a
-- paid checkout remembers its payment (the PaymentIntent refunds and
-- disputes name), when it was paid, and how much of it was taken back.
ALTER TABLE payment_checkouts
    ADD COLUMN payment_intent text CHECK (length(payment_intent) <= 255),
    ADD COLUMN paid_at timestamptz,
    ADD COLUMN refunded bigint NOT NULL DEFAULT 0 CHECK (refunded >= 0),
    ADD COLUMN disputed bigint NOT NULL DEFAULT 0 CHECK (disputed >= 0);
CREATE INDEX payment_checkouts_intent_idx ON payment_checkouts (provider, payment_intent);
CREATE INDEX payment_checkouts_open_idx ON payment_checkouts (account_id, created_at)
    WHERE paid_at IS NULL;

-- Each dispute takes its amount back once, and gives it back once when
-- its funds are reinstated.
CREATE TABLE payment_disputes (
    provider    text NOT NULL CHECK (provider IN ('stripe')),
    dispute_id  text NOT NULL CHECK (length(dispute_id) BETWEEN 1 AND 255),
    checkout_id text NOT NULL CHECK (length(checkout_id) <= 255),
    amount      bigint NOT NULL CHECK (amount >= 0),
    reinstated  boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, dispute_id)
);

-- What a take-back could not find on the balance (which never goes below
-- zero): the account owes it and is disabled until the operator settles.
ALTER TABLE accounts ADD COLUMN payment_debt bigint NOT NULL DEFAULT 0 CHECK (payment_debt >= 0);
