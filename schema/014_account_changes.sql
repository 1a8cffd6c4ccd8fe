-- Changing the e-mail address (a link to the new address) and deleting an
-- account (disabled first, so every aasd stops and settles its sandboxes;
-- then its personal data is replaced: docs/dashboard.md).
ALTER TABLE email_links DROP CONSTRAINT email_links_purpose_check;
ALTER TABLE email_links ADD CONSTRAINT email_links_purpose_check
    CHECK (purpose IN ('verify', 'reset', 'email'));
ALTER TABLE email_links
    ADD COLUMN new_email text CHECK (length(new_email) BETWEEN 3 AND 254);

ALTER TABLE accounts ADD COLUMN deleted_at timestamptz;

-- Checkouts aasd made: a paid event credits only one of these, for its
-- account and its amount (not whatever a checkout elsewhere on the same
-- provider account says).
CREATE TABLE payment_checkouts (
    provider    text NOT NULL CHECK (provider IN ('stripe')),
    checkout_id text NOT NULL CHECK (length(checkout_id) BETWEEN 1 AND 255),
    account_id  uuid NOT NULL REFERENCES accounts(id),
    amount      bigint NOT NULL CHECK (amount > 0),
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, checkout_id)
);
