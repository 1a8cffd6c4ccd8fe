-- Changing the e-mail address (a link to the new address) and deleting an
-- account (disabled first, so every aasd stops and settles its sandboxes;
-- then its personal data is replaced: docs/dashboard.md).
ALTER TABLE email_links DROP CONSTRAINT email_links_purpose_check;
ALTER TABLE email_links ADD CONSTRAINT email_links_purpose_check
    CHECK (purpose IN ('verify', 'reset', 'email'));
ALTER TABLE email_links
    ADD COLUMN new_email text CHECK (length(new_email) BETWEEN 3 AND 254);

ALTER TABLE accounts ADD COLUMN deleted_at timestamptz;
